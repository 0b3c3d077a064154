package backendtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/novox/postgres-provider/ports"
	"github.com/novox/postgres-provider/tests/poll"
)

// RunServer checks the contract of ports.Server beside Backend's (Run): what a daemon asks of
// an opened backend for readiness, /status and /metrics. open opens a Server for resource on
// the server the contract runs on, closed at the test's end; secret is the password its
// connection carries, which Server never shows; fresh is a consumer never created.
func RunServer(t *testing.T, open func(t *testing.T, resource string) ports.Server, secret string, fresh func() ports.Provision) {
	ctx := context.Background()
	t.Run("names its server, never the password", func(t *testing.T) {
		s := open(t, "contract-name")
		name := s.Server()
		if name == "" || secret != "" && strings.Contains(name, secret) {
			t.Fatalf("Server() = %q", name)
		}
	})
	t.Run("a ping answers, the mode is said once asked, and nothing blocks it", func(t *testing.T) {
		s := open(t, "contract-ping")
		if err := s.Ping(ctx); err != nil {
			t.Fatalf("ping: %v", err)
		}
		if err := s.Standing(ctx); err != nil { // the check of it as a whole, without the record
			t.Fatalf("standing: %v", err)
		}
		if s.Kind() == "" {
			t.Fatal("no mode said once the server was checked as a whole")
		}
		if _, err := s.Managed(ctx); err != nil {
			t.Fatalf("managed: %v", err)
		}
		if s.Kind() == "" {
			t.Fatal("no mode said once the server was asked")
		}
		if b := s.Blocked(); b != "" {
			t.Fatalf("blocked on a quiet server: %s", b)
		}
	})
	t.Run("one replica leads a resource; another stands by until it gives the lease up", func(t *testing.T) {
		first, second := open(t, "contract-lead").Leadership(), open(t, "contract-lead").Leadership()
		if err := first.Held(ctx); err != nil || !first.Leader() {
			t.Fatalf("the first replica: held %v, leader %v", err, first.Leader())
		}
		if err := second.Held(ctx); !errors.Is(err, ports.ErrStandby) || second.Leader() {
			t.Fatalf("the second replica: held %v (want ErrStandby), leader %v", err, second.Leader())
		}
		first.Close()
		poll.Eventually(t, "the second replica takes the lease given up", time.Minute, func() bool {
			return second.Held(ctx) == nil && second.Leader()
		})
		second.Close()
	})
	t.Run("reads what each consumer it holds takes of the server, and only those", func(t *testing.T) {
		s := open(t, "contract-usage")
		u, ok := s.(ports.UsageReader)
		if !ok {
			t.Skip("the Server reads no usage (ports.UsageReader)")
		}
		p, never := fresh(), fresh()
		if _, err := s.Managed(ctx); err != nil { // as the loop does: the server as a whole first
			t.Fatalf("managed: %v", err)
		}
		if _, err := s.Create(ctx, p); err != nil {
			t.Fatalf("create %s: %v", p.As, err)
		}
		got, err := u.Usage(ctx, []string{p.As, never.As})
		if err != nil {
			t.Fatalf("usage: %v", err)
		}
		if got[p.As].DatabaseBytes <= 0 {
			t.Fatalf("usage of %s: %+v, want its database's size", p.As, got[p.As])
		}
		if _, ok := got[never.As]; ok {
			t.Fatalf("usage of %s, never created: %+v", never.As, got[never.As])
		}
	})
	t.Run("one that archives counts nothing before its first archive, lists its record's, and restores nothing it never archived", func(t *testing.T) {
		s := open(t, "contract-archives")
		a, ok := s.(ports.Archiving)
		if !ok {
			t.Skip("the Server keeps no archives (ports.Archiving)")
		}
		if c := a.Archived(); c != (ports.ArchiveCounts{}) {
			t.Fatalf("counts before any drop: %+v", c)
		}
		kept, err := a.Archives(ctx)
		if err != nil {
			t.Fatalf("archives: %v", err)
		}
		never := fresh()
		for _, k := range kept {
			if k.As == never.As {
				t.Fatalf("an archive of %s, never created: %+v", never.As, k)
			}
		}
		said, err := a.Restore(ctx, never.As, "")
		if err == nil {
			t.Fatalf("restored %s, never archived: %s", never.As, said)
		}
		if _, err := s.Managed(ctx); err != nil { // nothing of it was made
			t.Fatalf("managed: %v", err)
		}
		if got := s.HoldsAll(ctx, []ports.Provision{never}, time.Minute); got[0].Err == nil && got[0].Held {
			t.Fatalf("%s is held after a refused restore", never.As)
		}
	})
	t.Run("closed, it answers that it cannot be used, and does not hang", func(t *testing.T) {
		s := open(t, "contract-close")
		s.Close()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := s.Ping(cctx); err == nil {
			t.Fatal("a closed Server answers a ping")
		}
		if err := s.Standing(cctx); err == nil {
			t.Fatal("a closed Server stands")
		}
		if _, err := s.Managed(cctx); err == nil {
			t.Fatal("a closed Server reads its record")
		}
	})
}
