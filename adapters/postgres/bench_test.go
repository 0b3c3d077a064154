package postgres_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	"golang.org/x/sync/errgroup"

	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/ports"
	"github.com/novox/postgres-provider/tests/pgserver"
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
				if err := errOf(e.b.Create(ctx, p)); err != nil {
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
		if err := errOf(e.b.Create(ctx, p)); err != nil {
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
		skip bool // the inside skipped, as a verify pass between a consumer's looks inside
	}{{"no extensions", nil, false}, {"one extension each", []string{"pg_trgm"}, false},
		{"one extension each, inside skipped", []string{"pg_trgm"}, true}} {
		b.Run(c.name, func(b *testing.B) {
			e := newEnv(b)
			ps := make([]ports.Provision, 1000)
			for i := range ps {
				ps[i] = provision(name("verify"), c.exts...)
			}
			createAll(b, e.b, ps)
			check := func() {
				for _, a := range e.b.HoldsAll(ctx, ps, time.Minute) {
					if a.Err != nil || !a.Held {
						b.Fatalf("not held: %v %v", a.Err, a.Drift)
					}
				}
			}
			check() // the verifiers checked once
			for i := range ps {
				ps[i].SkipInside = c.skip
			}
			// The floor, timed in the same loop, interleaved: the least raw SQL that answers
			// the same question, one catalog round trip and, where extensions are named, one
			// connection per database on as many connections at once as the Backend's budget
			// gives its checks (postgres.DefaultMaxConnections/2).
			// The server's CPU is measured around the provider's part alone (where /proc shows
			// the server): what a verify pass costs the server, against which the budgets are set.
			var prov, floor, cpu time.Duration
			b.ResetTimer()
			for b.Loop() {
				c0 := e.serverCPU()
				t0 := time.Now()
				check()
				t1 := time.Now()
				cpu += e.serverCPU() - c0
				rawVerify(b, e, ps, len(c.exts) > 0 && !c.skip)
				prov, floor = prov+t1.Sub(t0), floor+time.Since(t1)
			}
			n := float64(b.N)
			b.ReportMetric(float64(prov.Milliseconds())/n, "prov-ms/op")
			b.ReportMetric(float64(floor.Milliseconds())/n, "floor-ms/op")
			b.ReportMetric(prov.Seconds()/floor.Seconds(), "prov/floor")
			if e.srv.Local != nil {
				b.ReportMetric(float64(cpu.Milliseconds())/n, "server-cpu-ms/op")
			}
		})
	}
}

// rawVerify is the floor of a verify pass over ps: one round trip for their roles and
// databases and, with extensions, which are installed in each database, read on
// postgres.DefaultMaxConnections/2 connections at once, each connecting as the Backend does.
func rawVerify(b *testing.B, e *env, ps []ports.Provision, extensions bool) {
	roles := make([]string, len(ps))
	for i, p := range ps {
		roles[i] = p.As
	}
	conn := e.admin("")
	var held int
	err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_authid a JOIN pg_catalog.pg_database d
		ON d.datname = a.rolname AND d.datdba = a.oid WHERE a.rolname = ANY($1) AND a.rolcanlogin AND a.rolpassword IS NOT NULL`, roles).Scan(&held)
	conn.Close(ctx)
	if err != nil || held != len(ps) {
		b.Fatalf("floor: %d of %d held: %v", held, len(ps), err)
	}
	if !extensions {
		return
	}
	cfg, err := pgx.ParseConfig(e.srv.URL)
	if err != nil {
		b.Fatal(err)
	}
	var g errgroup.Group
	g.SetLimit(postgres.DefaultMaxConnections / 2)
	for _, db := range roles {
		g.Go(func() error {
			c := cfg.Copy()
			c.Database = db
			conn, err := pgx.ConnectConfig(ctx, c)
			if err != nil {
				b.Error(err)
				return nil
			}
			var n int
			err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_extension WHERE extname = 'pg_trgm'`).Scan(&n)
			conn.Close(ctx)
			if err != nil || n != 1 {
				b.Errorf("floor: %s: %d installed: %v", db, n, err)
			}
			return nil
		})
	}
	_ = g.Wait() // every error is the benchmark's
}

// BenchmarkVerifyPassByMode is HoldsAll over 1,000 converged consumers without extensions, in
// each mode, timed with the server's CPU (this machine's postmaster and its backends, the ones
// that ended included): superuser mode checks the stored verifiers (one catalog round trip),
// delegated mode logs in as each consumer (a SCRAM exchange per consumer on the server) where
// the pass grants every one a login, and checks the rest alone where it grants none, as most
// verify passes under the login check's budget do (delegated-no-logins).
func BenchmarkVerifyPassByMode(b *testing.B) {
	for _, run := range []struct {
		name   string
		mode   postgres.Mode
		logins bool
	}{{"superuser", postgres.ModeSuperuser, true}, {"delegated", postgres.ModeDelegated, true}, {"delegated-no-logins", postgres.ModeDelegated, false}} {
		mode := run.mode
		b.Run(run.name, func(b *testing.B) {
			e := newEnv(b)
			backend := e.b
			if mode == postgres.ModeDelegated {
				backend, _ = e.delegated()
			}
			ps := make([]ports.Provision, 1000)
			for i := range ps {
				ps[i] = provision(name("mode"))
				ps[i].Login = run.logins // in delegated mode, a login each
			}
			createAll(b, backend, ps)
			check := func() {
				for _, a := range backend.HoldsAll(ctx, ps, time.Minute) {
					if a.Err != nil || !a.Held {
						b.Fatalf("not held: %v %v", a.Err, a.Drift)
					}
				}
			}
			check()
			cpu0 := e.serverCPU()
			b.ResetTimer()
			for b.Loop() {
				check()
			}
			b.StopTimer()
			b.ReportMetric((e.serverCPU()-cpu0).Seconds()*1000/float64(b.N), "server-cpu-ms/op")
		})
	}
}

// serverCPU is the CPU time the server this process started has used (pgserver.CPU: its
// postmaster's, that of the backends it has reaped, and that of those still running). Zero
// for a server named by PROVISIONER_TEST_DATABASE_URL.
func (e *env) serverCPU() time.Duration {
	e.t.Helper()
	if e.srv.Local == nil {
		return 0
	}
	is := is.New(e.t)
	if e.pm == 0 { // found once: each call's own session would count as the server's
		var backend int
		is.NoErr(e.admin("").QueryRow(ctx, "SELECT pg_catalog.pg_backend_pid()").Scan(&backend))
		pm, err := pgserver.Postmaster(backend)
		is.NoErr(err) // the postmaster, from /proc
		e.pm = pm
	}
	used, err := pgserver.CPU(e.pm)
	is.NoErr(err) // the server's CPU, from /proc
	return used
}

// createAll creates every one of ps through backend, eight at once.
func createAll(b *testing.B, backend *postgres.Backend, ps []ports.Provision) {
	var g errgroup.Group
	g.SetLimit(8)
	for _, p := range ps {
		g.Go(func() error {
			if err := errOf(backend.Create(ctx, p)); err != nil {
				b.Error(err)
			}
			return nil
		})
	}
	_ = g.Wait() // every error is the benchmark's
}
