package backendtest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/novox/postgres-provider/ports"
	"github.com/novox/postgres-provider/tests/poll"
)

// contract is one run of the contract: the backend, what the runner gives, and Run's helpers,
// for the parts that a backend may declare it skips.
type contract struct {
	b        ports.Backend
	fresh    func() ports.Provision
	w        World
	holds    func(t *testing.T, p ports.Provision) bool
	create   func(t *testing.T, p ports.Provision) ports.Act
	remove   func(t *testing.T, p ports.Provision)
	recorded func(t *testing.T, p ports.Provision) (ports.Managed, bool)
}

// restart: the record lives on the server, not in the Backend that wrote it.
func (c contract) restart(t *testing.T) {
	ctx := context.Background()
	active, withdrawn := c.fresh(), c.fresh()
	c.create(t, active)
	c.create(t, withdrawn)
	c.remove(t, withdrawn)
	was, _ := c.recorded(t, withdrawn)

	b := c.w.Restart(t)
	managed, err := b.Managed(ctx)
	if err != nil {
		t.Fatalf("managed, by a new Backend: %v", err)
	}
	var seen []ports.Managed
	for _, m := range managed {
		if m.As == active.As || m.As == withdrawn.As {
			seen = append(seen, m)
		}
	}
	if !sameRecord(seen, []ports.Managed{{As: active.As}, was}) {
		t.Fatalf("a new Backend knows %+v, want %s active and %+v", seen, active.As, was)
	}
	ps := []ports.Provision{active, withdrawn}
	for i := range ps {
		ps[i].Login = true
	}
	answers := b.HoldsAll(ctx, ps, time.Minute)
	if answers[0].Err != nil || !answers[0].Held || answers[1].Err != nil || answers[1].Held {
		t.Fatalf("a new Backend checks %s as %+v and the withdrawn %s as %+v", active.As, answers[0], withdrawn.As, answers[1])
	}
	seenActs := b.Foresee(ctx, ps, time.Minute)
	if seenActs[0].Err != nil || seenActs[0].Act != ports.ActNone || seenActs[1].Err != nil || seenActs[1].Act != ports.ActRepair {
		t.Fatalf("a new Backend foresees %+v, want nothing to do for %s and a repair of the withdrawn %s", seenActs, active.As, withdrawn.As)
	}
	// What it made is its own to take back, and the withdrawn its own to reinstate: neither is
	// made anew nor adopted.
	for i, want := range []ports.Act{ports.ActNone, ports.ActRepair} {
		did, err := b.Create(ctx, ps[i])
		if err != nil || did != want && !(want == ports.ActNone && did == ports.ActRepair) {
			t.Fatalf("a new Backend's create of %s did %q (%v), want %q", ps[i].As, did, err, want)
		}
	}
	after, err := b.Managed(ctx)
	if err != nil {
		t.Fatalf("managed, by a new Backend: %v", err)
	}
	if i := slices.IndexFunc(after, func(m ports.Managed) bool { return m.As == withdrawn.As }); i < 0 || after[i].Withdrawn {
		t.Fatalf("reinstated by a new Backend, %s is recorded as %+v", withdrawn.As, after)
	}
}

// leaseWait bounds how long a freed lease may take to be taken by the other replica: the
// server frees it when the session that held it is gone, a moment after it is told to go.
const leaseWait = 15 * time.Second

// lease: of two replicas of one resource, one holds the lease; closing or a dead session frees it.
func (c contract) lease(t *testing.T) {
	ctx := context.Background()
	resource := c.fresh().As // a resource of this test's own: no other replica contends for it
	one, closeOne := c.w.Lease(t, resource)
	two, closeTwo := c.w.Lease(t, resource)
	t.Cleanup(closeOne)
	t.Cleanup(closeTwo)
	standby := func(who string, l ports.Lease) {
		t.Helper()
		if err := l.Held(ctx); !errors.Is(err, ports.ErrStandby) {
			t.Fatalf("%s, while the other holds the lease: %v, want standing by", who, err)
		}
	}
	if err := one.Held(ctx); err != nil {
		t.Fatalf("the first replica to ask: %v, want the lease", err)
	}
	if err := one.Held(ctx); err != nil {
		t.Fatalf("the first replica, asking again: %v, want the lease kept", err)
	}
	standby("the second", two)

	closeOne()
	if err := poll.Until(ctx, "the second takes a closed lease", leaseWait, poll.Every, func() (bool, error) {
		return two.Held(ctx) == nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	standby("the first, closed", one)
	if err := two.Held(ctx); err != nil {
		t.Fatalf("the second, asking again: %v, want the lease kept", err)
	}

	c.w.EndLease(t, resource) // the second's session, as the server ends a dead replica's
	if err := poll.Until(ctx, "the first takes the lease of a replica whose session ended", leaseWait, poll.Every, func() (bool, error) {
		return one.Held(ctx) == nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	standby("the second, its session ended", two)
}

// withExtensions is p asking for the extensions names.
func withExtensions(p ports.Provision, names ...string) ports.Provision {
	p.Values = maps.Clone(p.Values)
	exts := make([]any, len(names))
	for i, n := range names {
		exts[i] = n
	}
	p.Values["extensions"] = exts
	return p
}

// extensions: a backend that makes no extension cannot pass this.
func (c contract) extensions(t *testing.T) {
	installed := func(as string) []string {
		t.Helper()
		if c.w.Installed == nil {
			return nil
		}
		return c.w.Installed(t, as)
	}
	x := c.w.Extension
	p := withExtensions(c.fresh())
	c.create(t, p)
	if slices.Contains(installed(p.As), x) {
		t.Fatalf("%s installed for %s, which did not ask for it", x, p.As)
	}
	asks := withExtensions(p, x)
	if c.holds(t, asks) {
		t.Fatalf("%s held asking for %s before a create made it", p.As, x)
	}
	c.create(t, asks)
	if !c.holds(t, asks) {
		t.Fatalf("%s not held after a create made %s", p.As, x)
	}
	if c.w.Installed != nil && !slices.Contains(installed(p.As), x) {
		t.Fatalf("%s held, yet the server has %v installed in its database", p.As, installed(p.As))
	}
	if c.w.DropExtension != nil {
		c.w.DropExtension(t, p.As, x)
		skip := asks
		skip.SkipInside = true
		if h := c.b.HoldsAll(context.Background(), []ports.Provision{skip}, time.Minute)[0]; h.Err != nil || !h.Held {
			t.Fatalf("%s dropped by hand, the inside skipped: held %v, drift %v, %v; want held, as last found", x, h.Held, h.Drift, h.Err)
		}
		if c.holds(t, asks) {
			t.Fatalf("%s held by a check that looks inside, though %s was dropped in its database", p.As, x)
		}
		c.create(t, asks)
		if !c.holds(t, asks) || c.w.Installed != nil && !slices.Contains(installed(p.As), x) {
			t.Fatalf("%s not made again after it was dropped by hand", x)
		}
	}

	const unknown = "novox_no_such_extension"
	q := withExtensions(c.fresh(), unknown, x)
	did, err := c.b.Create(context.Background(), q)
	var incomplete *ports.Incomplete
	if !errors.As(err, &incomplete) || did != ports.ActCreate || !lacksOnly(incomplete.Lacks, unknown) {
		t.Fatalf("create asking for %s, which the server has not, and %s: %q, %v; want it made without the one, "+
			"and an *Incomplete naming it", unknown, x, did, err)
	}
	h := c.b.HoldsAll(context.Background(), []ports.Provision{q}, time.Minute)[0]
	if h.Err != nil || !h.Held || !lacksOnly(h.Lacks, unknown) {
		t.Fatalf("%s without the extension the server has not: held %v, lacks %q, %v; want held, lacking it", q.As, h.Held, h.Lacks, h.Err)
	}
	if f := c.b.Foresee(context.Background(), []ports.Provision{q}, time.Minute)[0]; f.Err != nil || f.Act != ports.ActNone || !lacksOnly(f.Lacks, unknown) {
		t.Fatalf("foresee of %s: %q, lacks %q, %v; want nothing to do, lacking %s", q.As, f.Act, f.Lacks, f.Err, unknown)
	}
	if c.w.Installed != nil {
		if got := installed(q.As); !slices.Contains(got, x) || slices.Contains(got, unknown) {
			t.Fatalf("%s asked for %s and %s; the server has %v installed", q.As, unknown, x, got)
		}
	}
	if m, ok := c.recorded(t, q); !ok || m.Withdrawn {
		t.Fatalf("%s recorded %v as %+v", q.As, ok, m)
	}
}

// withLimit is p asking for a connection limit of n.
func withLimit(p ports.Provision, n int) ports.Provision {
	p.Derived = maps.Clone(p.Derived)
	if p.Derived == nil {
		p.Derived = map[string]any{}
	}
	p.Derived["connection_limit"] = float64(n) // as decoded from the contributions' JSON
	return p
}

// limits: a limit asked is held, and one changed behind the backend's back is repaired.
func (c contract) limits(t *testing.T) {
	raw := func(p ports.Provision, want int) {
		t.Helper()
		if c.w.Limit != nil {
			if got := c.w.Limit(t, p.As); got != want {
				t.Fatalf("%s held, yet the server says its connection limit is %d, want %d", p.As, got, want)
			}
		}
	}
	p := withLimit(c.fresh(), 3)
	c.create(t, p)
	if !c.holds(t, p) {
		t.Fatalf("%s not held after a create with a connection limit", p.As)
	}
	raw(p, 3)

	c.w.SetLimit(t, p.As, 7)
	h := c.b.HoldsAll(context.Background(), []ports.Provision{p}, time.Minute)[0]
	if h.Err != nil || h.Held || len(h.Drift) == 0 {
		t.Fatalf("a connection limit changed behind the backend's back: held %v, drift %v, error %v", h.Held, h.Drift, h.Err)
	}
	if did := c.create(t, p); did != ports.ActRepair {
		t.Fatalf("a create of a changed connection limit said %q, want %q", did, ports.ActRepair)
	}
	if !c.holds(t, p) {
		t.Fatalf("%s not held after a create repaired its connection limit", p.As)
	}
	raw(p, 3)

	more := withLimit(p, 4)
	if c.holds(t, more) {
		t.Fatalf("%s held with a connection limit never asked for", p.As)
	}
	c.create(t, more)
	if !c.holds(t, more) {
		t.Fatalf("%s not held after a create with its new connection limit", p.As)
	}
	raw(more, 4)
}

// timeoutEach is the tiny bound on each check while some hang.
const timeoutEach = 300 * time.Millisecond

// timeout: checks that hang end at their deadline, and those not started by then are answered
// ErrNotAsked; nothing is left behind.
func (c contract) timeout(t *testing.T) {
	ctx := context.Background()
	// As many hang as the backend checks at once: the others cannot start before one has
	// timed out.
	ps := make([]ports.Provision, c.w.AtOnce+2)
	for i := range ps {
		ps[i] = c.fresh()
		c.create(t, ps[i])
		ps[i].Login = true
	}
	var releases []func()
	for _, p := range ps[:c.w.AtOnce] {
		release := sync.OnceFunc(c.w.Hang(t, p.As))
		t.Cleanup(release)
		releases = append(releases, release)
	}
	start := time.Now()
	answers := c.b.HoldsAll(ctx, ps, timeoutEach)
	took := time.Since(start)
	if len(answers) != len(ps) {
		t.Fatalf("%d answers for %d consumers", len(answers), len(ps))
	}
	for i, a := range answers {
		switch {
		case i < c.w.AtOnce && (a.Err == nil || a.Held):
			t.Fatalf("a hung check of %s answered held %v, error %v; want an error", ps[i].As, a.Held, a.Err)
		case i >= c.w.AtOnce && !errors.Is(a.Err, ports.ErrNotAsked):
			t.Fatalf("a check of %s not started before the hung ones timed out answered %+v; want it not asked (the hung ones answered %+v)",
				ps[i].As, a, answers[:c.w.AtOnce])
		}
	}
	// Each hung check ends at its own deadline; a generous bound, for a loaded machine.
	if bound := 20*timeoutEach + 10*time.Second; took > bound {
		t.Fatalf("HoldsAll took %s with every check bounded by %s", took, timeoutEach)
	}
	for _, release := range releases {
		release()
	}
	for _, p := range ps { // the backend left nothing behind: each is checked as before
		if !c.holds(t, p) {
			t.Fatalf("%s not held once its check no longer hangs", p.As)
		}
	}
}

// lacksOnly is whether lacks names the one extension name, and nothing else.
func lacksOnly(lacks []string, name string) bool {
	return len(lacks) == 1 && strings.Contains(lacks[0], name)
}
