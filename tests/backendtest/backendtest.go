// Package backendtest is the contract every ports.Backend keeps, written once and run against
// each implementation: the PostgreSQL adapter on a real server, and the fake the domain's tests
// use, so that the fake cannot drift from the real thing.
package backendtest

import (
	"context"
	"maps"
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
}

// Run checks b against the contract. fresh answers a consumer b has never seen, with a
// password, values and derived that b accepts; its values may hold "name" (renamed by the
// contract to change what is asked for). b must be the only one to manage what fresh makes.
// w does to b's resources what an operator or a consumer may.
func Run(t *testing.T, b ports.Backend, fresh func() ports.Provision, w World) {
	ctx := context.Background()
	holds := func(t *testing.T, p ports.Provision) bool {
		t.Helper()
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
	create := func(t *testing.T, p ports.Provision) {
		t.Helper()
		if err := b.Create(ctx, p); err != nil {
			t.Fatalf("create %s: %v", p.As, err)
		}
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
		if err := b.Create(ctx, powerful); err == nil {
			t.Fatal("a role holding more than the backend gives was taken over")
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
}
