package postgres_test

import (
	"context"
	"flag"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/ports"
	"github.com/novox/postgres-provider/tests/backendtest"
)

// contractWorld is w with what the contract's further parts need of a Backend connecting with
// url (as the superuser or the delegated provider), each done behind the Backend's back by the
// superuser and read from the server itself.
func (e *env) contractWorld(url string, w backendtest.World) backendtest.World {
	w.Restart = func(*testing.T) ports.Backend { return e.backend(url) }
	w.Lease = func(_ *testing.T, resource string) (ports.Lease, func()) {
		l := e.backendWith(postgres.Config{URL: url, Resource: resource}).Lease()
		return l, l.Close
	}
	w.EndLease = func(t *testing.T, resource string) {
		// pg_terminate_backend with a timeout waits for the session, and its lock, to be gone.
		var ended bool
		if err := e.admin("").QueryRow(ctx, `SELECT coalesce(bool_and(pg_terminate_backend(a.pid, 10000)), false)
FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid AND l.locktype = 'advisory' AND l.granted
WHERE a.application_name LIKE 'novox-provisioner/' || $1 || '/%/lease'`, resource).Scan(&ended); err != nil || !ended {
			t.Fatalf("end the session holding the lease of %s: ended %v, %v", resource, ended, err)
		}
	}
	if e.available("pg_trgm") {
		w.Extension = "pg_trgm"
		w.Installed = func(t *testing.T, as string) []string {
			conn := e.connect(t, as) // its database is named after it
			defer conn.Close(ctx)
			rows, _ := conn.Query(ctx, "SELECT extname::text FROM pg_extension ORDER BY 1")
			names, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatalf("extensions in %s: %v", as, err)
			}
			return names
		}
		w.DropExtension = func(t *testing.T, as, name string) {
			e.exec(as, "DROP EXTENSION "+pgx.Identifier{name}.Sanitize())
		}
	} else {
		w.Skip.Extensions = "pg_trgm is not available on this server"
	}
	w.SetLimit = func(t *testing.T, as string, n int) {
		e.exec("", "ALTER ROLE "+pgx.Identifier{as}.Sanitize()+" CONNECTION LIMIT "+strconv.Itoa(n))
	}
	w.Limit = func(t *testing.T, as string) int {
		var n int
		conn := e.connect(t, "")
		defer conn.Close(ctx)
		if err := conn.QueryRow(ctx, "SELECT rolconnlimit FROM pg_roles WHERE rolname = $1", as).Scan(&n); err != nil {
			t.Fatalf("connection limit of %s: %v", as, err)
		}
		return n
	}
	// A check reads the extensions in the consumer's database; a session holding the catalog's
	// table locked makes it wait.
	w.Hang = func(t *testing.T, as string) func() {
		conn := e.connect(t, as) // closed on release: a long test leaves no idle session behind
		_, err := conn.Exec(ctx, "BEGIN; LOCK TABLE pg_catalog.pg_extension IN ACCESS EXCLUSIVE MODE")
		if err != nil {
			_ = conn.Close(ctx)
			t.Fatalf("hang the check of %s: %v", as, err)
		}
		return func() { _ = conn.Close(context.WithoutCancel(ctx)) }
	}
	// The Backend checks as many databases at once as its connections not pooled: half of
	// Config.MaxConnections (its default here), rounded down.
	w.AtOnce = postgres.DefaultMaxConnections - (postgres.DefaultMaxConnections+1)/2
	return w
}

// connect is a superuser connection to db ("" for postgres) that the caller closes.
func (e *env) connect(t *testing.T, db string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(e.srv.URL)
	if err != nil {
		t.Fatalf("parse the server's URL: %v", err)
	}
	if db != "" {
		cfg.Database = db
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect to %s as the superuser: %v", db, err)
	}
	return conn
}

// openServer opens Servers as the daemon does (ports.Kind: the flags, then Open) on url, each
// closed at its test's end.
func (e *env) openServer(url string) func(t *testing.T, resource string) ports.Server {
	return func(t *testing.T, resource string) ports.Server {
		t.Helper()
		var f postgres.Flags
		fs := flag.NewFlagSet("contract", flag.ContinueOnError)
		f.Flags(fs)
		if err := fs.Parse([]string{"--database-url", url}); err != nil {
			t.Fatal(err)
		}
		s, err := f.Open(ports.Options{Resource: resource, Log: e.logger()})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(s.Close)
		return s
	}
}
