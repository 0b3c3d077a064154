package app

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/domain"
)

// fakeServer is what the daemon asks of the backend, answering as a test sets it.
type fakeServer struct {
	pingErr error
	blocked string
	kind    string
	pings   int
}

func (s *fakeServer) Server() string { return "provisioner@127.0.0.1:5432" }
func (s *fakeServer) Ping(context.Context) error {
	s.pings++
	return s.pingErr
}
func (s *fakeServer) Blocked() string { return s.blocked }
func (s *fakeServer) Kind() string    { return s.kind }

// fakeLease is the lease, held or not as a test sets it.
type fakeLease struct{ leader bool }

func (l *fakeLease) Leader() bool { return l.leader }

// fakeLoop is a loop that last got on at progress; the daemon's endpoints only ask it that.
type fakeLoop struct{ progress time.Time }

func (l *fakeLoop) Run(context.Context, <-chan struct{}, func(domain.Report)) {}
func (l *fakeLoop) RetryNow()                                                 {}
func (l *fakeLoop) LastProgress() time.Time                                   { return l.progress }
func (l *fakeLoop) Progress() domain.Progress                                 { return domain.Progress{} }
func (l *fakeLoop) Settling() []domain.Status                                 { return nil }
func (l *fakeLoop) WatchedBy(func() bool)                                     {}

func newTestDaemon(s *fakeServer, l *fakeLease) *daemon {
	return newDaemon(Config{Resource: "postgres", Every: 5 * time.Second, HoldsTimeout: 30 * time.Second},
		&fakeLoop{progress: time.Now()}, s, l, nil, &notifier{})
}

// get is the daemon's answer to GET path: its code and body.
func get(d *daemon, path string) (int, string) {
	rec := httptest.NewRecorder()
	d.handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	return rec.Code, rec.Body.String()
}

func TestNotReadyBeforeTheFirstPass(t *testing.T) {
	is := is.New(t)
	d := newTestDaemon(&fakeServer{}, &fakeLease{})
	code, body := get(d, "/readyz")
	is.Equal(code, 503)                                // no pass, not ready
	is.Equal(body, "not ready: no pass has run yet\n") // and says why
	code, body = get(d, "/status")
	is.Equal(code, 200)
	var doc map[string]any
	is.NoErr(json.Unmarshal([]byte(body), &doc))
	is.Equal(doc["ready"], false)
	is.Equal(doc["not_ready"], "no pass has run yet")
	is.Equal(doc["last_pass"], nil)     // no pass to show
	is.Equal(doc["consumers"], []any{}) // an empty list, not null
	is.Equal(doc["leaving"], []any{})   // likewise
}

func TestReadyNeedsTheFileReadAndTheServerUsable(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		report  domain.Report
		server  fakeServer
		code    int
		body    string
		pinged  bool
		reached string // provisioner_backend_reachable after the pass
	}{
		{"file read, server answers", domain.Report{FileRead: true}, fakeServer{}, 200, "ready\n", true, "1"},
		{"the server could not be used", domain.Report{FileRead: true, ServerProblem: "connect: connection refused"}, fakeServer{},
			503, "not ready: connect: connection refused\n", false, "0"},
		{"the file unusable", domain.Report{FileProblem: "contributions file is not JSON (/c.json): unexpected end of JSON input"}, fakeServer{}, 503,
			"not ready: the contributions file could not be read or used: contributions file is not JSON (/c.json): unexpected end of JSON input\n", true, "1"},
		{"a standby that did not read the file", domain.Report{Standby: true}, fakeServer{}, 200, "ready\n", true, "1"},
		{"the ping after the pass fails", domain.Report{FileRead: true}, fakeServer{pingErr: errors.New("server closed the connection")},
			503, "not ready: server closed the connection\n", true, "0"},
		{"a superuser's prepared transaction in the way", domain.Report{FileRead: true}, fakeServer{blocked: "prepared transaction px holds a lock"},
			503, "not ready: prepared transaction px holds a lock; an operator must end it\n", true, "1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			s := c.server
			d := newTestDaemon(&s, &fakeLease{leader: true})
			d.observe(ctx, c.report)
			code, body := get(d, "/readyz")
			is.Equal(code, c.code)          // ready or not
			is.Equal(body, c.body)          // with the real reason
			is.Equal(s.pings > 0, c.pinged) // the server pinged only where the pass found it usable
			_, metrics := get(d, "/metrics")
			is.True(strings.Contains(metrics, `provisioner_backend_reachable{resource="postgres"} `+c.reached+"\n")) // as the pass or ping found it
			is.True(strings.Contains(metrics, `provisioner_leader{resource="postgres"} 1`+"\n"))                     // the lease as last asked
		})
	}
}

func TestReadyAgainOnceTheServerIsBack(t *testing.T) {
	is := is.New(t)
	s := &fakeServer{}
	d := newTestDaemon(s, &fakeLease{})
	d.observe(context.Background(), domain.Report{FileRead: true, ServerProblem: "down"})
	code, _ := get(d, "/readyz")
	is.Equal(code, 503) // down
	d.observe(context.Background(), domain.Report{FileRead: true})
	code, body := get(d, "/readyz")
	is.Equal(code, 200) // the next pass found it back: the old reason is gone
	is.Equal(body, "ready\n")
}

func TestStatusShowsTheLastPassAndWhoIsLeaving(t *testing.T) {
	is := is.New(t)
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	d := newTestDaemon(&fakeServer{kind: "delegated"}, &fakeLease{leader: true})
	d.observe(context.Background(), domain.Report{FileRead: true, Took: 1500 * time.Millisecond, WithdrawalsHeld: 1, MassWithdrawal: true,
		Status: []*domain.Status{{As: "letta", State: domain.StateApplied, Since: at, CheckedAt: at, NextCheck: at.Add(time.Minute)}},
		Leaving: []domain.Leaving{
			{As: "gone", State: domain.LeavingWithdrawn, Since: at.Add(-time.Hour), DropAt: at.Add(23 * time.Hour)},
			{As: "going", State: domain.LeavingHeld, WithdrawAt: at.Add(time.Minute)},
			{As: "stuck", State: domain.LeavingFailing, LastError: "stuck: withdraw failed, will retry: no"},
		}})
	code, body := get(d, "/status")
	is.Equal(code, 200)
	var doc struct {
		Resource  string           `json:"resource"`
		Role      string           `json:"role"`
		Mode      string           `json:"mode"`
		Ready     bool             `json:"ready"`
		LastPass  map[string]any   `json:"last_pass"`
		Consumers []map[string]any `json:"consumers"`
		Leaving   []map[string]any `json:"leaving"`
	}
	is.NoErr(json.Unmarshal([]byte(body), &doc))
	is.Equal(doc.Resource, "postgres")
	is.Equal(doc.Role, "acting")
	is.Equal(doc.Mode, "delegated") // as the server was last found
	is.True(doc.Ready)
	is.Equal(doc.LastPass["took_seconds"], 1.5)     // a number of seconds
	is.Equal(doc.LastPass["mass_withdrawal"], true) // a mass withdrawal is held
	is.Equal(doc.LastPass["withdrawals_held"], 1.0)
	is.Equal(len(doc.Consumers), 1)
	is.Equal(doc.Consumers[0]["as"], "letta")
	is.Equal(doc.Consumers[0]["since"], "2026-12-03T12:00:00Z") // times in RFC 3339
	is.Equal(len(doc.Leaving), 3)                               // every consumer the file no longer lists, in the report's order
	is.Equal(doc.Leaving[0], map[string]any{"as": "gone", "state": "withdrawn",
		"since": "2026-12-03T11:00:00Z", "drop_at": "2026-12-04T11:00:00Z"}) // times in RFC 3339, none left out
	is.Equal(doc.Leaving[1], map[string]any{"as": "going", "state": "held", "withdraw_at": "2026-12-03T12:01:00Z"}) // no drop date where none is set
	is.Equal(doc.Leaving[2]["last_error"], "stuck: withdraw failed, will retry: no")

	d.observe(context.Background(), domain.Report{Standby: true})
	_, body = get(d, "/status")
	is.NoErr(json.Unmarshal([]byte(body), &doc))
	is.Equal(doc.Role, "standby")                    // another replica holds the lease
	is.Equal(doc.LastPass["mass_withdrawal"], false) // said, not left out
}

func TestHealthzSaysWhenTheLoopIsStuck(t *testing.T) {
	is := is.New(t)
	l := &fakeLoop{progress: time.Now()}
	d := newDaemon(Config{Every: 5 * time.Second, HoldsTimeout: 30 * time.Second}, l, &fakeServer{}, &fakeLease{}, nil, &notifier{})
	code, body := get(d, "/healthz")
	is.Equal(code, 200) // it got on just now
	is.Equal(body, "ok\n")
	l.progress = time.Now().Add(-time.Hour)
	code, body = get(d, "/healthz")
	is.Equal(code, 503)                                                                       // an hour without a step
	is.True(strings.HasPrefix(body, "stuck: the loop has not got on for 1h0m0s (more than ")) // and for how long
}

// A file that turns bad leaves the last listing read in /status, with why the file is bad, and
// provisioner status prints both: the table does not empty while what was applied stands.
func TestStatusKeepsTheLastListingWhileTheFileIsBad(t *testing.T) {
	is := is.New(t)
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	d := newTestDaemon(&fakeServer{}, &fakeLease{leader: true})
	why := "contributions file is not JSON (/c.json): unexpected end of JSON input"
	d.observe(context.Background(), domain.Report{FileProblem: why,
		Status: []*domain.Status{{As: "letta", State: domain.StateApplied, Since: at}}})
	_, body := get(d, "/status")
	var doc statusDoc
	is.NoErr(json.Unmarshal([]byte(body), &doc))
	is.Equal(doc.FileProblem, why)
	is.Equal(len(doc.Consumers), 1) // the last listing read
	is.Equal(doc.Consumers[0].As, "letta")
	is.True(!doc.Ready && strings.HasSuffix(doc.NotReady, why)) // and readiness says why
	var out strings.Builder
	writeStatus(&out, doc, at)
	is.True(strings.Contains(out.String(), "file: "+why+"; the consumers below are those of the last listing read\n"))
	is.True(strings.Contains(out.String(), "letta "))
}
