// Package backendtest is the contract every ports.Backend keeps, written once and run against
// each implementation: the PostgreSQL adapter on a real server, and the fake the domain's tests
// use, so that the fake cannot drift from the real thing.
package backendtest

import (
	"context"
	"maps"
	"testing"

	"github.com/novox/postgres-provider/ports"
)

// Run checks b against the contract. fresh answers a consumer b has never seen, with a
// password, values and derived that b accepts; its values may hold "name" (renamed by the
// contract to change what is asked for).
func Run(t *testing.T, b ports.Backend, fresh func() ports.Provision) {
	ctx := context.Background()
	holds := func(t *testing.T, p ports.Provision) bool {
		t.Helper()
		held, err := b.Holds(ctx, p)
		if err != nil {
			t.Fatalf("holds %s: %v", p.As, err)
		}
		return held
	}
	create := func(t *testing.T, p ports.Provision) {
		t.Helper()
		if err := b.Create(ctx, p); err != nil {
			t.Fatalf("create %s: %v", p.As, err)
		}
	}
	remove := func(t *testing.T, p ports.Provision) {
		t.Helper()
		if err := b.Remove(ctx, p.As, p.Derived); err != nil {
			t.Fatalf("remove %s: %v", p.As, err)
		}
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
	t.Run("removed is not held, and removing again is no error", func(t *testing.T) {
		p := fresh()
		create(t, p)
		remove(t, p)
		if holds(t, p) {
			t.Fatal("held after remove")
		}
		remove(t, p)
		remove(t, fresh()) // never created
	})
	t.Run("created again after remove", func(t *testing.T) {
		p := fresh()
		create(t, p)
		remove(t, p)
		create(t, p)
		if !holds(t, p) {
			t.Fatal("not held after create following remove")
		}
	})
}
