package postgres_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	"golang.org/x/sync/errgroup"

	"github.com/novox/postgres-provider/adapters/postgres"
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

	conn := e.mustLogin(p.As, p.Password, p.As)
	_, err = conn.Exec(ctx, "CREATE TABLE filler AS SELECT repeat('x', 1000) AS pad FROM generate_series(1, 16384)")
	is.NoErr(err)
	var table int64
	is.NoErr(conn.QueryRow(ctx, "SELECT pg_total_relation_size('filler')").Scan(&table))
	is.True(table >= 16<<20) // 16,384 rows of 1 kB: at least 16 MiB
	e.mustLogin(p.As, p.Password, p.As)

	after, err := e.b.Usage(ctx, []string{p.As, q.As})
	is.NoErr(err)
	grew := after[p.As].DatabaseBytes - before[p.As].DatabaseBytes
	is.True(grew >= table && grew < table+4<<20)                    // the table shows, and little else
	is.Equal(after[p.As].Connections, 2)                            // its two sessions
	is.Equal(after[q.As].Connections, 0)                            // none of the other's
	is.Equal(after[q.As].DatabaseBytes, before[q.As].DatabaseBytes) // the other's unchanged
}

// BenchmarkUsage is the usage read at 1,000 consumers (PROVISIONER_BENCH_CONSUMERS to change
// it), each a role owning a database copied from template0, on a server of its own: what the
// daemon asks every --usage-every. It reports the server's own time for the query (EXPLAIN
// ANALYZE) beside the round trip.
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
			_, err = conn.Exec(ctx, "CREATE DATABASE "+logins[i]+" OWNER "+logins[i]+" TEMPLATE template0")
			return err
		})
	}
	is.New(b).NoErr(g.Wait()) // the consumers' roles and databases
	var plan []string
	rows, err := e.admin("").Query(ctx, "EXPLAIN (ANALYZE, FORMAT TEXT) "+postgres.UsageQuery, logins)
	is.New(b).NoErr(err)
	plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
	is.New(b).NoErr(err)
	b.Logf("%d consumers: %s", n, plan[len(plan)-1]) // Execution Time
	b.ResetTimer()
	for b.Loop() {
		u, err := e.b.Usage(ctx, logins)
		if err != nil || len(u) != n {
			b.Fatalf("usage: %d of %d, %v", len(u), n, err)
		}
	}
	b.ReportMetric(float64(n), "consumers")
}
