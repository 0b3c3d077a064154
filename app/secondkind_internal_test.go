package app

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/ports"
	"github.com/novox/postgres-provider/tests/poll"
)

// memKind is a second backend, as small as one can be: consumers kept in memory. It is wired in
// the way wiring.go wires PostgreSQL's, and nothing else of app/ knows it.
type memKind struct {
	shelf  string // its one flag
	server *memServer
}

func (k *memKind) Flags(fs *flag.FlagSet) {
	fs.StringVar(&k.shelf, "mem-shelf", "top", "the shelf (`SHELF`) the consumers are kept on")
}
func (k *memKind) Environ(map[string]string) {}
func (k *memKind) Check() error              { return nil }
func (k *memKind) Secrets() []string         { return nil }
func (k *memKind) Open(ports.Options) (ports.Server, error) {
	return k.server, nil
}

// memServer keeps each consumer it made, by login, with the password it was given.
type memServer struct {
	mu   sync.Mutex
	made map[string]string
}

func (s *memServer) Create(_ context.Context, p ports.Provision) (ports.Act, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, had := s.made[p.As]
	s.made[p.As] = p.Password
	if had {
		return ports.ActRepair, nil
	}
	return ports.ActCreate, nil
}
func (s *memServer) Remove(_ context.Context, as string) error {
	return s.Drop(context.Background(), as)
}
func (s *memServer) Drop(_ context.Context, as string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.made, as)
	return nil
}
func (s *memServer) HoldsAll(_ context.Context, ps []ports.Provision, _ time.Duration) []ports.Checked {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ports.Checked, len(ps))
	for i, p := range ps {
		switch pw, ok := s.made[p.As]; {
		case !ok:
			out[i].Drift = []string{"missing"}
		case pw != p.Password:
			out[i].Drift = []string{"password"}
		default:
			out[i].Held = true
		}
	}
	return out
}
func (s *memServer) Foresee(ctx context.Context, ps []ports.Provision, each time.Duration) []ports.Foresight {
	out := make([]ports.Foresight, len(ps))
	for i, c := range s.HoldsAll(ctx, ps, each) {
		switch {
		case c.Held:
		case len(c.Drift) == 1 && c.Drift[0] == "missing":
			out[i].Act = ports.ActCreate
		default:
			out[i] = ports.Foresight{Act: ports.ActRepair, Why: c.Drift}
		}
	}
	return out
}
func (s *memServer) Clashes(ps []ports.Provision) []error { return make([]error, len(ps)) }
func (s *memServer) Managed(context.Context) ([]ports.Managed, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ports.Managed
	for as := range s.made {
		out = append(out, ports.Managed{As: as})
	}
	return out, nil
}
func (s *memServer) Standing(context.Context) error { return nil }
func (s *memServer) Server() string                 { return "memory" }
func (s *memServer) Ping(context.Context) error     { return nil }
func (s *memServer) Blocked() string                { return "" }
func (s *memServer) Kind() string                   { return "in memory" }
func (s *memServer) Leadership() ports.Leadership   { return memLease{} }
func (s *memServer) Close()                         {}
func (s *memServer) holds(as string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pw, ok := s.made[as]
	return pw, ok
}
func (memLease) Held(context.Context) error { return nil }
func (memLease) Leader() bool               { return true }
func (memLease) Close()                     {}

type memLease struct{}

// withMemKind wires memKind in place of PostgreSQL's for the test: the one line wiring.go holds.
func withMemKind(t *testing.T) *memServer {
	s := &memServer{made: map[string]string{}}
	was := newKind
	newKind = func() ports.Kind { return &memKind{server: s} }
	t.Cleanup(func() { newKind = was })
	return s
}

// TestASecondKindRunsWithNoChangeToApp: a backend app/ was never told of lists its flag with its
// placeholder in --help, serves a resource only --resource names (it gives no default), makes a
// consumer in a pass, and shows it on /status in its own mode's words.
func TestASecondKindRunsWithNoChangeToApp(t *testing.T) {
	is := is.New(t)
	s := withMemKind(t)
	ctx := context.Background()

	var out bytes.Buffer
	is.Equal(Main(ctx, []string{"--help"}, nil, &out, io.Discard), 0)
	is.True(strings.Contains(out.String(), "--mem-shelf SHELF  [PROVISIONER_MEM_SHELF, default top]"))                                      // its flag, placeholder and all
	is.True(strings.Contains(out.String(), "--resource NAME  [PROVISIONER_RESOURCE]\n"))                                                    // no default but the kind's
	is.True(strings.Index(out.String(), "--mem-shelf") < strings.Index(out.String(), "--every"))                                            // with the backend's, after --resource
	is.True(!strings.Contains(out.String(), "--database-url") && !strings.Contains(out.String(), "--adopt"))                                // none of PostgreSQL's
	is.True(strings.HasPrefix(out.String(), "provisioner: the novox service mesh's provider.\n"))                                           // nor its name
	is.True(!strings.Contains(out.String(), "PostgreSQL") && !strings.Contains(out.String(), "delegated"))                                  // nor its mode's words
	is.Equal(Main(ctx, []string{"--receives", "x"}, nil, io.Discard, io.Discard), 2)                                                        // --resource is needed
	is.Equal(Main(ctx, []string{"--receives", "x", "--resource", "r", "--max-connections", "1", "--once"}, nil, io.Discard, io.Discard), 1) // one connection is enough for it

	dir := t.TempDir()
	secret := filepath.Join(dir, "letta.secret")
	is.NoErr(os.WriteFile(secret, []byte("minted-pw\n"), 0o600))
	file := filepath.Join(dir, "contributions.json")
	is.NoErr(os.WriteFile(file, []byte(`{"requirement": "shelves", "given": [{"as": "letta", "secret": "`+secret+`"}]}`), 0o600))

	var stderr bytes.Buffer
	is.Equal(Main(ctx, []string{"--receives", file, "--resource", "shelves", "--once"}, nil, io.Discard, &stderr), 0) // a pass
	pw, ok := s.holds("letta")
	is.True(ok)
	is.Equal(pw, "minted-pw") // made, under the minted password

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	is.NoErr(err)
	addr := ln.Addr().String()
	is.NoErr(ln.Close())
	dctx, stop := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() {
		done <- Main(dctx, []string{"--receives", file, "--resource", "shelves", "--listen", addr}, nil, io.Discard, io.Discard)
	}()
	var doc struct {
		Resource  string `json:"resource"`
		Mode      string `json:"mode"`
		Consumers []struct {
			As    string `json:"as"`
			State string `json:"state"`
		} `json:"consumers"`
	}
	poll.Eventually(t, "/status shows the consumer", 30*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/status")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&doc) == nil && len(doc.Consumers) == 1 && doc.Mode != ""
	})
	stop()
	is.Equal(<-done, 0)
	is.Equal(doc.Resource, "shelves")
	is.Equal(doc.Mode, "in memory") // the kind's own words
	is.Equal(doc.Consumers[0].As, "letta")
}
