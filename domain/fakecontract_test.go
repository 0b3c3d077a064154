package domain_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"

	"github.com/novox/postgres-provider/ports"
	"github.com/novox/postgres-provider/tests/backendtest"
)

// contractWorld is what the contract needs of the fake beyond world: a restart, a lease,
// connection limits and a hang, each modelled as the fake's store models the server; the
// fake has no extensions, and says so.
func (b *fakeBackend) contractWorld() backendtest.World {
	w := b.world()
	leases := &fakeLeases{holder: map[string]*fakeLease{}}
	w.Restart = func(*testing.T) ports.Backend { return b.restarted() }
	w.Lease = func(_ *testing.T, resource string) (ports.Lease, func()) {
		l := &fakeLease{leases: leases, resource: resource}
		return l, l.close
	}
	w.EndLease = func(_ *testing.T, resource string) { leases.end(resource) }
	w.SetLimit = func(_ *testing.T, as string, n int) {
		b.mu.Lock()
		defer b.mu.Unlock()
		m := b.store[as]
		m.p.Derived = maps.Clone(m.p.Derived)
		m.p.Derived["connection_limit"] = float64(n)
		b.store[as] = m
	}
	w.Limit = func(t *testing.T, as string) int {
		b.mu.Lock()
		defer b.mu.Unlock()
		n, ok := b.store[as].p.Derived["connection_limit"].(float64)
		if !ok {
			t.Fatalf("%s holds no connection limit", as)
		}
		return int(n)
	}
	w.Hang = b.hang
	w.AtOnce = 1 // HoldsAll checks one consumer after another
	w.Skip.Extensions = "the fake makes no extensions: its staged changes (due, has) stand for them in the loop's tests"
	return w
}

// restarted is a new fake on the fake's server: it knows what the server keeps (what was made,
// and what was made elsewhere) and nothing the first held in memory. It shares nothing with
// the first from then on: a fake has no server apart from its own memory.
func (b *fakeBackend) restarted() *fakeBackend {
	b.mu.Lock()
	defer b.mu.Unlock()
	return &fakeBackend{now: b.now, byLogin: b.byLogin, store: maps.Clone(b.store), outside: maps.Clone(b.outside)}
}

// hang makes the check of as wait until its deadline, or until released.
func (b *fakeBackend) hang(_ *testing.T, as string) (release func()) {
	released := make(chan struct{})
	before := b.holdsFn
	b.holdsFn = func(ctx context.Context, p ports.Provision) error {
		if p.As == as {
			select {
			case <-ctx.Done():
				return fmt.Errorf("check %s: %w", as, ctx.Err())
			case <-released:
			}
		}
		if before != nil {
			return before(ctx, p)
		}
		return nil
	}
	return sync.OnceFunc(func() { close(released) })
}

// fakeLeases is the server's side of the fake's leases: who holds each resource's.
type fakeLeases struct {
	mu     sync.Mutex
	holder map[string]*fakeLease
}

// end ends the session of the replica that holds resource's lease: the lease is free.
func (s *fakeLeases) end(resource string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.holder, resource)
}

// fakeLease is one replica's lease of a resource: it takes the lease where nobody holds it.
type fakeLease struct {
	leases   *fakeLeases
	resource string
}

var _ ports.Lease = (*fakeLease)(nil)

func (l *fakeLease) Held(context.Context) error {
	l.leases.mu.Lock()
	defer l.leases.mu.Unlock()
	switch h, ok := l.leases.holder[l.resource]; {
	case !ok:
		l.leases.holder[l.resource] = l
	case h != l:
		return fmt.Errorf("lease of %s: %w", l.resource, ports.ErrStandby)
	}
	return nil
}

// close gives the lease up, where this replica holds it.
func (l *fakeLease) close() {
	l.leases.mu.Lock()
	defer l.leases.mu.Unlock()
	if l.leases.holder[l.resource] == l {
		delete(l.leases.holder, l.resource)
	}
}

// A backend that adopts nothing keeps the contract, declaring so.
func TestFakeBackendWithoutAdoptionKeepsTheContract(t *testing.T) {
	n := 0
	b := &fakeBackend{adoptsNothing: true}
	w := b.contractWorld()
	w.Skip.Adoption = "it refuses every login it did not make"
	backendtest.Run(t, b, func() ports.Provision {
		n++
		as := fmt.Sprintf("consumer%d", n)
		return ports.Provision{As: as, Password: "pw", Values: map[string]any{"name": as}, Derived: map[string]any{}}
	}, w)
}
