package postgres_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	"golang.org/x/sync/errgroup"

	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/ports"
	"github.com/novox/postgres-provider/tests/poll"
)

func TestUsageIsEachConsumersSizeAndSessions(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p, q := provision(name("use")), provision(name("use"))
	e.mustCreate(p)
	e.mustCreate(q)
	before, err := e.b.Usage(ctx, []string{p.As, q.As, "no_such_login"})
	is.NoErr(err)
	is.Equal(len(before), 2)                // the login without a role left out
	is.True(before[p.As].DatabaseBytes > 0) // an empty database has its catalog
	is.Equal(e.b.SizesRead(), 2)            // each sized

	conn := e.mustLogin(p.As, p.Password, p.As)
	_, err = conn.Exec(ctx, "CREATE TABLE filler AS SELECT repeat('x', 1000) AS pad FROM generate_series(1, 16384)")
	is.NoErr(err)
	var table int64
	is.NoErr(conn.QueryRow(ctx, "SELECT pg_total_relation_size('filler')").Scan(&table))
	is.True(table >= 16<<20)  // 16,384 rows of 1 kB: at least 16 MiB
	is.NoErr(conn.Close(ctx)) // 14 reports a session's row counts at its next transaction or its end
	// A session's backend ends after its client has left: until it has, the server still
	// counts it among the role's sessions.
	is.True(e.ended(conn)) // the closed session's backend gone
	e.mustLogin(p.As, p.Password, p.As)
	e.mustLogin(p.As, p.Password, p.As)

	// The server counts the rows written once the session has reported them: the size follows
	// at the first read after.
	var after map[string]postgres.Usage
	poll.Eventually(t, "the rows written counted", 30*time.Second, func() bool {
		after, err = e.b.Usage(ctx, []string{p.As, q.As})
		is.NoErr(err)
		return after[p.As].DatabaseBytes-before[p.As].DatabaseBytes >= table
	})
	grew := after[p.As].DatabaseBytes - before[p.As].DatabaseBytes
	is.True(grew >= table && grew < table+4<<20)                    // the table shows, and little else
	is.Equal(after[p.As].Connections, 2)                            // its two sessions
	is.Equal(after[q.As].Connections, 0)                            // none of the other's
	is.Equal(after[q.As].DatabaseBytes, before[q.As].DatabaseBytes) // the other's unchanged
}

// A database nobody wrote to since it was sized is not sized again (pg_database_size walks its
// files) until sizesFresh has passed; its size stands. Where the server counts no rows written
// (a statistics collector without a socket), each is sized at every read, as before.
func TestUsageSizesOnlyWhatWasWrittenTo(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p, q := provision(name("use")), provision(name("use"))
	e.mustCreate(p)
	e.mustCreate(q)
	for _, c := range []ports.Provision{p, q} {
		conn := e.mustLogin(c.As, c.Password, c.As)
		_, err := conn.Exec(ctx, "CREATE TABLE t AS SELECT 1 AS one")
		is.NoErr(err)
		is.NoErr(conn.Close(ctx)) // a session's counts are reported by its end at the latest
	}
	counts := func() bool { // both sessions' counts reported
		var n int64
		is.NoErr(e.admin("").QueryRow(ctx, "SELECT min(pg_stat_get_db_tuples_inserted(oid)) FROM pg_database WHERE datname = ANY($1)",
			[]string{p.As, q.As}).Scan(&n))
		return n > 0
	}
	counted := poll.Within(5*time.Second, counts)
	logins := []string{p.As, q.As}
	first, err := e.b.Usage(ctx, logins)
	is.NoErr(err)
	read := e.b.SizesRead()
	again, err := e.b.Usage(ctx, logins)
	is.NoErr(err)
	is.Equal(again, first) // the sizes stand
	if !counted {
		t.Logf("this server counts no rows written: each database sized at every read")
		is.Equal(e.b.SizesRead(), read+2)
		return
	}
	is.Equal(e.b.SizesRead(), read) // nothing written since: nothing sized

	restore := postgres.SetSizesFresh(0)
	defer restore()
	_, err = e.b.Usage(ctx, logins)
	is.NoErr(err)
	is.Equal(e.b.SizesRead(), read+2) // sized longer ago than sizesFresh: both again
}

// BenchmarkUsage is the usage read at 1,000 consumers (PROVISIONER_BENCH_CONSUMERS to change
// it), each a role owning a database copied from template0 and written to once (as the
// provider's create does), on a server of its own: what the daemon asks every --usage-every.
// It reports the server's CPU for the first read, which sizes every database, and for each read
// after, which sizes none (nothing written since), beside the round trip.
func BenchmarkUsage(b *testing.B) {
	n := 1000
	if s := os.Getenv("PROVISIONER_BENCH_CONSUMERS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	e := newEnvOwn(b)
	logins := make([]string, n)
	var g errgroup.Group
	g.SetLimit(4)
	for i := range logins {
		logins[i] = fmt.Sprintf("usage_%d", i)
		g.Go(func() error {
			conn, err := pgx.Connect(ctx, e.srv.URL)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			if _, err := conn.Exec(ctx, "CREATE ROLE "+logins[i]+" LOGIN"); err != nil {
				return err
			}
			if _, err = conn.Exec(ctx, "CREATE DATABASE "+logins[i]+" OWNER "+logins[i]+" TEMPLATE template0"); err != nil {
				return err
			}
			cfg := conn.Config().Copy()
			cfg.Database = logins[i]
			in, err := pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				return err
			}
			defer in.Close(ctx)
			_, err = in.Exec(ctx, "CREATE SCHEMA written")
			return err
		})
	}
	is.New(b).NoErr(g.Wait()) // the consumers' roles and databases
	cpu0 := e.serverCPU()
	if u, err := e.b.Usage(ctx, logins); err != nil || len(u) != n {
		b.Fatalf("usage: %d of %d, %v", len(u), n, err)
	}
	b.Logf("%d consumers: the first read, which sizes each database, took %.0f ms of the server's CPU", n,
		(e.serverCPU()-cpu0).Seconds()*1000) // a metric reported before the loop is reset with its timer
	b.ResetTimer()
	cpu0 = e.serverCPU()
	for b.Loop() {
		u, err := e.b.Usage(ctx, logins)
		if err != nil || len(u) != n {
			b.Fatalf("usage: %d of %d, %v", len(u), n, err)
		}
	}
	b.ReportMetric((e.serverCPU()-cpu0).Seconds()*1000/float64(b.N), "server-cpu-ms/op")
	b.ReportMetric(float64(n), "consumers")
}
