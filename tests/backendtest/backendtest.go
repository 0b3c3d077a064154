// Package backendtest is the contract every ports.Backend keeps, written once and run against
// each implementation: the PostgreSQL adapter on a real server, and the fake the domain's tests
// use, so that the fake cannot drift from the real thing.
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
)

// World is what the contract does to a backend's resources behind its back, as an operator or
// a consumer with the backend's own tools would.
type World struct {
	// Join makes the login as a member of another resource's login, and another login a
	// member of it: it then shares what they hold, and they what it holds.
	Join func(t *testing.T, as string)
	// Plain makes a login named as that the backend did not make, exactly as the backend would
	// have made it: the backend may adopt it.
	Plain func(t *testing.T, as string)
	// Powerful makes a login named as that the backend did not make, holding more than the
	// backend would have given it (a member of another login): the backend must refuse it.
	Powerful func(t *testing.T, as string)

	// The parts of the contract below: a runner gives what a part needs, or declares in Skip
	// that its backend does not keep that part, and why. A part it neither gives nor skips
	// fails.

	// Restart is a new Backend on the same server, as a replica started afresh has: it knows
	// only what the server keeps.
	Restart func(t *testing.T) ports.Backend
	// Lease is a replica's lease of resource, on the backend's server: two for one resource
	// contend for it. Its close gives it up. EndLease ends the session of the replica that holds
	// the lease of resource as the server does for one that died.
	Lease    func(t *testing.T, resource string) (l ports.Lease, close func())
	EndLease func(t *testing.T, resource string)
	// Extension names an extension the server has (values.extensions). Installed, where given,
	// lists the extensions installed in the consumer as's database, read from the server itself.
	Extension string
	Installed func(t *testing.T, as string) []string
	// DropExtension, where given, drops the extension name inside the consumer as's database
	// behind the backend's back, as an operator's hand may: a check that looks inside finds
	// it, one that skips inside (Provision.SkipInside) does not.
	DropExtension func(t *testing.T, as, name string)
	// SetLimit sets the connection limit of the login as (derived.connection_limit) behind the
	// backend's back; Limit, where given, reads it from the server itself.
	SetLimit func(t *testing.T, as string, n int)
	Limit    func(t *testing.T, as string) int
	// Hang makes the backend's check of the consumer as hang until release is called (it is
	// also called at the test's end). AtOnce is how many consumers' checks the backend makes
	// at once.
	Hang   func(t *testing.T, as string) (release func())
	AtOnce int

	// Skip declares the parts of the contract the backend does not keep, each with why.
	Skip Skip
}

// Skip names the parts of the contract a backend does not keep: a part whose reason is not
// empty is skipped, saying so and why (go test -v shows it), rather than passed unasked.
type Skip struct {
	// Adoption: the backend takes over no login it did not make (World.Plain, World.Powerful).
	Adoption string
	// Restart: no Backend but this one can be made on its server (World.Restart).
	Restart string
	// Lease: the backend has no lease (World.Lease, World.EndLease).
	Lease string
	// Extensions: the backend makes no extensions (World.Extension).
	Extensions string
	// Limits: the backend keeps no connection limit (World.SetLimit).
	Limits string
	// Timeout: no check of the backend can be made to hang (World.Hang).
	Timeout string
}

// part runs the part of the contract called name as a subtest: skipped where the runner
// declares it skips it, failed where it gives not what the part needs (given false).
func part(t *testing.T, name, skip string, given bool, f func(t *testing.T)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		switch {
		case skip != "":
			t.Skipf("the backend declares it does not keep this part: %s", skip)
		case !given:
			t.Fatalf("the runner neither gives what this part needs nor declares it skips it")
		}
		f(t)
	})
}

// Run checks b against the contract. fresh answers a consumer b has never seen, with a
// password, values and derived that b accepts; its values may hold "name" (renamed by the
// contract to change what is asked for). b must be the only one to manage what fresh makes.
// w does to b's resources what an operator or a consumer may.
func Run(t *testing.T, b ports.Backend, fresh func() ports.Provision, w World) {
	ctx := context.Background()
	holds := func(t *testing.T, p ports.Provision) bool {
		t.Helper()
		p.Login = true // the password checked, whichever way the backend checks it
		h := b.HoldsAll(ctx, []ports.Provision{p}, time.Minute)[0]
		if h.Err != nil {
			t.Fatalf("holds %s: %v", p.As, h.Err)
		}
		if !h.Held && len(h.Drift) == 0 {
			t.Fatalf("%s not held, and nothing said to have drifted", p.As)
		}
		if h.Held && len(h.Drift) > 0 {
			t.Fatalf("%s held, yet drifted: %v", p.As, h.Drift)
		}
		return h.Held
	}
	create := func(t *testing.T, p ports.Provision) ports.Act {
		t.Helper()
		did, err := b.Create(ctx, p)
		if err != nil {
			t.Fatalf("create %s: %v", p.As, err)
		}
		return did
	}
	remove := func(t *testing.T, p ports.Provision) {
		t.Helper()
		if err := b.Remove(ctx, p.As); err != nil {
			t.Fatalf("remove %s: %v", p.As, err)
		}
	}
	drop := func(t *testing.T, p ports.Provision) {
		t.Helper()
		if err := b.Drop(ctx, p.As); err != nil {
			t.Fatalf("drop %s: %v", p.As, err)
		}
	}
	// recorded is what the record says of p: listed, and withdrawn.
	recorded := func(t *testing.T, p ports.Provision) (ports.Managed, bool) {
		t.Helper()
		managed, err := b.Managed(ctx)
		if err != nil {
			t.Fatalf("managed: %v", err)
		}
		for _, m := range managed {
			if m.As == p.As {
				return m, true
			}
		}
		return ports.Managed{}, false
	}

	t.Run("stands where its record can be read", func(t *testing.T) {
		if err := b.Standing(ctx); err != nil {
			t.Fatalf("standing: %v", err)
		}
		recorded(t, fresh())
	})
	t.Run("not held before it is created", func(t *testing.T) {
		if holds(t, fresh()) {
			t.Fatal("held without a create")
		}
	})
	t.Run("held once created, and again after a repeat", func(t *testing.T) {
		p := fresh()
		create(t, p)
		if !holds(t, p) {
			t.Fatal("not held after create")
		}
		create(t, p)
		if !holds(t, p) {
			t.Fatal("not held after a second create")
		}
	})
	t.Run("a consumer as created is due no staged change, and one Create is let make that is not due changes nothing", func(t *testing.T) {
		p := fresh()
		create(t, p)
		a := b.HoldsAll(ctx, []ports.Provision{p}, time.Minute)[0]
		if a.Err != nil || !a.Held || len(a.Updates) != 0 {
			t.Fatalf("as created: held %v, updates %v, error %v", a.Held, a.Updates, a.Err)
		}
		p.Updates = []string{"extension no_such_extension -> 1.0"}
		create(t, p)
		if !holds(t, p) {
			t.Fatal("not held after a create let make a change it is not due")
		}
	})
	t.Run("a batch of checks tells its trace each answer, once at most", func(t *testing.T) {
		made, other := fresh(), fresh()
		create(t, made)
		var mu sync.Mutex
		told := 0
		traced := ports.WithCheckTrace(ctx, &ports.CheckTrace{Answered: func(n int) {
			mu.Lock()
			defer mu.Unlock()
			if n <= 0 {
				t.Errorf("told %d answers", n)
			}
			told += n
		}})
		answers := b.HoldsAll(traced, []ports.Provision{made, other, made}, time.Minute)
		mu.Lock()
		defer mu.Unlock()
		if told < 1 || told > len(answers) {
			t.Fatalf("told %d answers of a batch of %d", told, len(answers))
		}
	})
	t.Run("another password is not held until created", func(t *testing.T) {
		p := fresh()
		create(t, p)
		rotated := p
		rotated.Password = p.Password + "-rotated"
		if holds(t, rotated) {
			t.Fatal("held under a password never given")
		}
		create(t, rotated)
		if !holds(t, rotated) || holds(t, p) {
			t.Fatal("the rotated password is not the one held")
		}
	})
	t.Run("a check not granted a login finds all but a password checked by login", func(t *testing.T) {
		p := fresh()
		create(t, p)
		rotated := p
		rotated.Password = p.Password + "-rotated"
		a := b.HoldsAll(ctx, []ports.Provision{rotated}, time.Minute)[0]
		byLogin := false
		if lc, ok := b.(ports.LoginChecker); ok {
			byLogin = lc.ChecksByLogin()
		}
		if a.Err != nil || a.Held != byLogin {
			t.Fatalf("another password, no login granted: held %v (by login %v), drift %v, error %v", a.Held, byLogin, a.Drift, a.Err)
		}
		changed := rotated
		changed.Values = maps.Clone(p.Values)
		changed.Values["name"] = p.As + "_c"
		a = b.HoldsAll(ctx, []ports.Provision{changed}, time.Minute)[0]
		if a.Err != nil || a.Held || len(a.Drift) == 0 {
			t.Fatalf("other values, no login granted: held %v, drift %v, error %v", a.Held, a.Drift, a.Err)
		}
	})
	t.Run("a check that skips inside still checks the rest", func(t *testing.T) {
		p := fresh()
		create(t, p)
		skip := p
		skip.SkipInside, skip.Login = true, true
		if a := b.HoldsAll(ctx, []ports.Provision{skip}, time.Minute)[0]; a.Err != nil || !a.Held || len(a.Updates)+len(a.Has) != 0 {
			t.Fatalf("as created, inside skipped: held %v, drift %v, updates %v, has %v, error %v", a.Held, a.Drift, a.Updates, a.Has, a.Err)
		}
		rotated := skip
		rotated.Password = p.Password + "-rotated"
		if a := b.HoldsAll(ctx, []ports.Provision{rotated}, time.Minute)[0]; a.Err != nil || a.Held {
			t.Fatalf("another password, inside skipped, login granted: held %v, drift %v, error %v", a.Held, a.Drift, a.Err)
		}
		skip.Values = maps.Clone(p.Values)
		skip.Values["name"] = p.As + "_s"
		if a := b.HoldsAll(ctx, []ports.Provision{skip}, time.Minute)[0]; a.Err != nil || a.Held || len(a.Drift) == 0 {
			t.Fatalf("other values, inside skipped: held %v, drift %v, error %v", a.Held, a.Drift, a.Err)
		}
	})
	t.Run("other values are not held until created", func(t *testing.T) {
		p := fresh()
		create(t, p)
		changed := p
		changed.Values = maps.Clone(p.Values)
		changed.Values["name"] = p.As + "_b"
		if holds(t, changed) {
			t.Fatal("held with values never given")
		}
		create(t, changed)
		if !holds(t, changed) {
			t.Fatal("not held after create with the new values")
		}
	})
	t.Run("created is recorded as managed and active", func(t *testing.T) {
		p := fresh()
		if _, ok := recorded(t, p); ok {
			t.Fatal("recorded before it was created")
		}
		create(t, p)
		m, ok := recorded(t, p)
		if !ok || m.Withdrawn || !m.Since.IsZero() {
			t.Fatalf("after create, recorded %v as %+v", ok, m)
		}
	})
	t.Run("removed is not held, recorded withdrawn, and removing again is no error", func(t *testing.T) {
		p := fresh()
		create(t, p)
		before := time.Now().Add(-time.Minute) // the backend's clock may not be ours to the second
		remove(t, p)
		if holds(t, p) {
			t.Fatal("held after remove")
		}
		m, ok := recorded(t, p)
		if !ok || !m.Withdrawn || m.Since.Before(before) {
			t.Fatalf("after remove, recorded %v as %+v", ok, m)
		}
		remove(t, p)
		remove(t, fresh()) // never created
		if _, ok := recorded(t, p); !ok {
			t.Fatal("a second remove lost the record")
		}
	})
	t.Run("created again after remove, and active again", func(t *testing.T) {
		p := fresh()
		create(t, p)
		remove(t, p)
		create(t, p)
		if !holds(t, p) {
			t.Fatal("not held after create following remove")
		}
		if m, ok := recorded(t, p); !ok || m.Withdrawn {
			t.Fatalf("after create following remove, recorded %v as %+v", ok, m)
		}
	})
	t.Run("dropped is gone, record and all, and dropping again is no error", func(t *testing.T) {
		for _, removedFirst := range []bool{false, true} {
			p := fresh()
			create(t, p)
			if removedFirst {
				remove(t, p)
			}
			drop(t, p)
			if holds(t, p) {
				t.Fatal("held after drop")
			}
			if _, ok := recorded(t, p); ok {
				t.Fatal("still recorded after drop")
			}
			drop(t, p)
			drop(t, fresh())
			create(t, p)
			if !holds(t, p) {
				t.Fatal("not held after create following drop")
			}
		}
	})
	t.Run("HoldsAll answers each in order, as a check of it alone does", func(t *testing.T) {
		held, lost, never := fresh(), fresh(), fresh()
		create(t, held)
		create(t, lost)
		remove(t, lost)
		ps := []ports.Provision{never, held, lost, held}
		for i := range ps {
			ps[i].Login = true
		}
		answers := b.HoldsAll(ctx, ps, 30*time.Second)
		if len(answers) != len(ps) {
			t.Fatalf("%d answers for %d consumers", len(answers), len(ps))
		}
		for i, want := range []bool{false, true, false, true} {
			a := answers[i]
			if a.Err != nil {
				t.Fatalf("answer %d: %v", i, a.Err)
			}
			if a.Held != want || a.Held != holds(t, ps[i]) {
				t.Fatalf("answer %d (%s): held %v, want %v", i, ps[i].As, a.Held, want)
			}
			if !a.Held && len(a.Drift) == 0 {
				t.Fatalf("answer %d not held, and nothing said to have drifted", i)
			}
		}
		if len(b.HoldsAll(ctx, nil, time.Second)) != 0 {
			t.Fatal("answers for no consumers")
		}
	})
	t.Run("a membership either way is drift, and create takes it away", func(t *testing.T) {
		p := fresh()
		create(t, p)
		w.Join(t, p.As)
		h := b.HoldsAll(ctx, []ports.Provision{p}, time.Minute)[0]
		if h.Err != nil {
			t.Fatalf("holds %s: %v", p.As, h.Err)
		}
		if h.Held || len(h.Drift) == 0 {
			t.Fatalf("a membership behind the backend's back: held %v, drift %v", h.Held, h.Drift)
		}
		create(t, p)
		if !holds(t, p) {
			t.Fatal("not held after create took the membership away")
		}
	})
	t.Run("a role made as the backend makes it is adopted; one that holds more is refused and left alone", func(t *testing.T) {
		if w.Skip.Adoption != "" {
			t.Skipf("the backend declares it does not keep this part: %s", w.Skip.Adoption)
		}
		plain, powerful := fresh(), fresh()
		w.Plain(t, plain.As)
		create(t, plain)
		if !holds(t, plain) {
			t.Fatal("a plain role not held after create adopted it")
		}
		if m, ok := recorded(t, plain); !ok || m.Withdrawn {
			t.Fatalf("an adopted role recorded %v as %+v", ok, m)
		}
		w.Powerful(t, powerful.As)
		if _, err := b.Create(ctx, powerful); !errors.Is(err, ports.ErrRefused) {
			t.Fatalf("a role holding more than the backend gives: create answered %v, want a refusal", err)
		}
		if holds(t, powerful) {
			t.Fatal("a refused role is held")
		}
		if _, ok := recorded(t, powerful); ok {
			t.Fatal("a refused role is recorded")
		}
		if err := b.Drop(ctx, powerful.As); err == nil {
			t.Fatal("a role the backend did not make was dropped")
		}
	})
	t.Run("Create says what it did", func(t *testing.T) {
		p := fresh()
		if did := create(t, p); did != ports.ActCreate {
			t.Fatalf("a first create said %q, want %q", did, ports.ActCreate)
		}
		if did := create(t, p); did != ports.ActNone && did != ports.ActRepair {
			t.Fatalf("a create of what is held said %q, want nothing (or repair)", did)
		}
		rotated := p
		rotated.Password = p.Password + "-rotated"
		if did := create(t, rotated); did != ports.ActRepair {
			t.Fatalf("a create under a new password said %q, want %q", did, ports.ActRepair)
		}
		if w.Skip.Adoption != "" {
			return // a backend that adopts nothing says so in its skip of adoption
		}
		plain := fresh()
		w.Plain(t, plain.As)
		if did := create(t, plain); did != ports.ActAdopt {
			t.Fatalf("a create of a plain role made elsewhere said %q, want %q", did, ports.ActAdopt)
		}
	})
	t.Run("two consumers asking for one database: the later is refused, naming the earlier, in one batch as after", func(t *testing.T) {
		first, second, other := fresh(), fresh(), fresh()
		second.Values = maps.Clone(second.Values)
		second.Values["name"] = first.Values["name"]
		clashes := b.Clashes([]ports.Provision{first, other, second})
		if clashes[0] != nil || clashes[1] != nil || !errors.Is(clashes[2], ports.ErrRefused) {
			t.Fatalf("clashes: %v", clashes)
		}
		if !strings.Contains(clashes[2].Error(), "consumer "+first.As+" has it") {
			t.Fatalf("the clash names not the consumer that has it: %v", clashes[2])
		}
		create(t, first)
		if seen := b.Foresee(ctx, []ports.Provision{second}, 30*time.Second)[0]; seen.Act != ports.ActRefuse ||
			!slices.Equal(seen.Why, []string{clashes[2].Error()}) {
			t.Fatalf("foreseen %+v, want the refusal %v", seen, clashes[2])
		}
		_, err := b.Create(ctx, second)
		if !errors.Is(err, ports.ErrRefused) || err.Error() != clashes[2].Error() {
			t.Fatalf("the later created: %v, want the refusal %v", err, clashes[2])
		}
		if _, ok := recorded(t, second); ok {
			t.Fatal("the refused consumer is recorded")
		}
		if !holds(t, first) {
			t.Fatal("the earlier no longer held")
		}
	})
	t.Run("Foresee names each act, in order, and changes nothing", func(t *testing.T) {
		made, held, rotated, joined, withdrawn, plain, powerful, empty := fresh(), fresh(), fresh(), fresh(), fresh(), fresh(), fresh(), fresh()
		create(t, held)
		create(t, rotated)
		rotated.Password += "-rotated"
		create(t, joined)
		w.Join(t, joined.As)
		create(t, withdrawn)
		remove(t, withdrawn)
		w.Plain(t, plain.As)
		w.Powerful(t, powerful.As)
		empty.Password = ""
		ps := []ports.Provision{made, held, rotated, joined, withdrawn, plain, powerful, empty}
		want := []ports.Act{ports.ActCreate, ports.ActNone, ports.ActRepair, ports.ActRepair, ports.ActRepair, ports.ActAdopt,
			ports.ActRefuse, ports.ActRefuse}
		makes := 6                 // the first of ps that Create makes
		if w.Skip.Adoption != "" { // a backend that adopts nothing refuses a plain role as any it did not make
			want[5], makes = ports.ActRefuse, 5
		}
		managedBefore, err := b.Managed(ctx)
		if err != nil {
			t.Fatalf("managed: %v", err)
		}
		heldBefore := b.HoldsAll(ctx, ps, 30*time.Second)
		seen := b.Foresee(ctx, ps, 30*time.Second)
		if len(seen) != len(ps) {
			t.Fatalf("%d answers for %d consumers", len(seen), len(ps))
		}
		for i, f := range seen {
			if f.Err != nil {
				t.Fatalf("foresee %s: %v", ps[i].As, f.Err)
			}
			if f.Act != want[i] {
				t.Fatalf("foresee %s (#%d): %q %v, want %q", ps[i].As, i, f.Act, f.Why, want[i])
			}
			if (f.Act == ports.ActNone) == (len(f.Why) > 0) && f.Act != ports.ActCreate {
				t.Fatalf("foresee %s: %q with why %v", ps[i].As, f.Act, f.Why)
			}
		}
		if !slices.Contains(seen[2].Why, "password") {
			t.Fatalf("a rotated password foreseen as %v, which does not name the password", seen[2].Why)
		}
		managedAfter, err := b.Managed(ctx)
		if err != nil {
			t.Fatalf("managed: %v", err)
		}
		if !sameRecord(managedBefore, managedAfter) {
			t.Fatalf("the record changed: %+v, then %+v", managedBefore, managedAfter)
		}
		for i, a := range b.HoldsAll(ctx, ps, 30*time.Second) {
			if a.Err != nil || heldBefore[i].Err != nil || a.Held != heldBefore[i].Held || !slices.Equal(a.Drift, heldBefore[i].Drift) {
				t.Fatalf("%s checked as %+v before Foresee and %+v after", ps[i].As, heldBefore[i], a)
			}
		}
		// What Foresee said is what Create then does.
		for i, p := range ps[:makes] {
			if did := create(t, p); did != want[i] && !(want[i] == ports.ActNone && did == ports.ActRepair) {
				t.Fatalf("create %s did %q, foreseen %q", p.As, did, want[i])
			}
		}
		for _, p := range append([]ports.Provision{powerful}, ps[makes:6]...) {
			if _, err := b.Create(ctx, p); !errors.Is(err, ports.ErrRefused) {
				t.Fatalf("create %s, foreseen refused: %v", p.As, err)
			}
		}
		if _, err := b.Create(ctx, empty); !errors.Is(err, ports.ErrInvalid) {
			t.Fatalf("create with an empty password, foreseen refused: %v", err)
		}
		if len(b.Foresee(ctx, nil, time.Second)) != 0 {
			t.Fatal("answers for no consumers")
		}
	})
	c := contract{b: b, fresh: fresh, w: w, holds: holds, create: create, remove: remove, recorded: recorded}
	part(t, "what one Backend made, a new Backend on the same server knows as managed, withdrawn or not", w.Skip.Restart,
		w.Restart != nil, c.restart)
	part(t, "one of two replicas holds the lease; closing it, or its session ending, frees it", w.Skip.Lease,
		w.Lease != nil && w.EndLease != nil, c.lease)
	part(t, "an extension the server has is made and held; one it has not is skipped, the rest made", w.Skip.Extensions,
		w.Extension != "", c.extensions)
	part(t, "a connection limit asked is held; one changed behind the backend's back is drift, and repaired", w.Skip.Limits,
		w.SetLimit != nil, c.limits)
	part(t, "a check that hangs ends at its deadline, and the checks not started then are not asked", w.Skip.Timeout,
		w.Hang != nil && w.AtOnce > 0, c.timeout)
}

// sameRecord is whether two listings of the record say the same, in any order.
func sameRecord(a, b []ports.Managed) bool {
	if len(a) != len(b) {
		return false
	}
	byLogin := map[string]ports.Managed{}
	for _, m := range a {
		byLogin[m.As] = m
	}
	for _, m := range b {
		was, ok := byLogin[m.As]
		if !ok || was.Withdrawn != m.Withdrawn || !was.Since.Equal(m.Since) {
			return false
		}
	}
	return true
}
