package postgres_test

import (
	"testing"
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
