package postgres_test

import (
	"sync"
	"testing"
	"time"

	"github.com/novox/postgres-provider/ports"
)

// benchCases are the consumers the Create and Holds benchmarks measure.
var benchCases = []struct {
	name string
	exts []string
}{{"no extensions", nil}, {"three extensions", []string{"pg_trgm", "dblink", "vector"}}}

// BenchmarkCreate is one consumer's Create when it already exists: what every re-apply costs.
func BenchmarkCreate(b *testing.B) {
	for _, c := range benchCases {
		b.Run(c.name, func(b *testing.B) {
			e := newEnv(b)
			p := provision(name("bench"), c.exts...)
			e.mustCreate(p)
			b.ResetTimer()
			for b.Loop() {
				if err := e.b.Create(ctx, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCreateNew is a Create from nothing: role, database (a copy of template1) and extensions.
func BenchmarkCreateNew(b *testing.B) {
	e := newEnv(b)
	for b.Loop() {
		p := provision(name("benchnew"), "pg_trgm")
		if err := e.b.Create(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHolds is one consumer's check: what every verify interval costs per consumer.
func BenchmarkHolds(b *testing.B) {
	for _, c := range benchCases {
		b.Run(c.name, func(b *testing.B) {
			e := newEnv(b)
			p := provision(name("bench"), c.exts...)
			e.mustCreate(p)
			var held bool
			for b.Loop() {
				held = e.holds(p)
			}
			if !held {
				b.Fatal("not held")
			}
		})
	}
}

// BenchmarkVerifyPass is HoldsAll over 1,000 converged consumers, their verifiers checked
// before: what a verify pass costs. Without extensions it is one catalog round trip; with one
// each, one short-lived connection per database besides.
func BenchmarkVerifyPass(b *testing.B) {
	for _, c := range []struct {
		name string
		exts []string
	}{{"no extensions", nil}, {"one extension each", []string{"pg_trgm"}}} {
		b.Run(c.name, func(b *testing.B) {
			e := newEnv(b)
			ps := make([]ports.Provision, 1000)
			for i := range ps {
				ps[i] = provision(name("verify"), c.exts...)
			}
			var wg sync.WaitGroup
			work := make(chan ports.Provision)
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for p := range work {
						if err := e.b.Create(ctx, p); err != nil {
							b.Error(err)
						}
					}
				}()
			}
			for _, p := range ps {
				work <- p
			}
			close(work)
			wg.Wait()
			check := func() {
				for _, a := range e.b.HoldsAll(ctx, ps, time.Minute) {
					if a.Err != nil || !a.Held {
						b.Fatalf("not held: %v %v", a.Err, a.Drift)
					}
				}
			}
			check() // the verifiers checked once
			b.ResetTimer()
			for b.Loop() {
				check()
			}
		})
	}
}
