package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
)

// The raw floor: the least SQL a correct provisioner must send, from this process, on P
// connections of its own that each take the next consumer as they are free. Connecting is part
// of what is timed, as it is of the provisioner's run.

// consumer is one consumer of the mesh: its login, which is also its database's name, and the
// password minted for it (never printed).
type consumer struct {
	name, password string
}

func names(cs []consumer) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.name
	}
	return out
}

// measure is one timed run: wall time, the CPU time of the client (this process for the raw
// side, the provisioner's process for the other), and the whole machine's busy CPU time over
// the run (the server's, the client's and whatever else runs).
type measure struct {
	wall, client, machine time.Duration
}

// timed runs fn and measures it; client is this process's CPU time.
func timed(fn func() error) (measure, error) {
	cpu0, mach0 := selfCPU(), machineCPU()
	start := time.Now()
	err := fn()
	wall := time.Since(start)
	return measure{wall: wall, client: selfCPU() - cpu0, machine: machineCPU() - mach0}, err
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (b *bench) connect(ctx context.Context, db string) (*pgx.Conn, error) {
	cfg := b.cfg.Copy()
	if db != "" {
		cfg.Database = db
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.Database, err)
	}
	return conn, nil
}

func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// parallel runs fn for each of n consumers, p at once, in order, on at most p connections to
// the postgres database (each opened when first needed, then reused), within the run's timeout;
// the first error stops the rest.
func (b *bench) parallel(ctx context.Context, n, p int, fn func(ctx context.Context, conn *pgx.Conn, i int) error) error {
	ctx, cancel := context.WithTimeout(ctx, b.opts.timeout)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, p))
	idle := make(chan *pgx.Conn, max(1, p)) // never more than p: at most p run at once
	defer func() {
		close(idle)
		for conn := range idle {
			closeConn(conn)
		}
	}()
	for i := range n {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			var conn *pgx.Conn
			select {
			case conn = <-idle:
			default:
				var err error
				if conn, err = b.connect(gctx, ""); err != nil {
					return err
				}
			}
			defer func() { idle <- conn }()
			return fn(gctx, conn, i)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err() // the run's timeout, where it cut the loop short between consumers
}

// rawCreate is the floor of creating cs from nothing: per consumer, the login role under its
// password (the server makes the SCRAM verifier), its database, CONNECT and TEMPORARY taken from
// PUBLIC, and, where ext is named, the extension created in the database.
func (b *bench) rawCreate(ctx context.Context, cs []consumer, ext string, p int) error {
	return b.parallel(ctx, len(cs), p, func(ctx context.Context, conn *pgx.Conn, i int) error {
		c := cs[i]
		if _, err := conn.Exec(ctx, "CREATE ROLE "+ident(c.name)+" LOGIN PASSWORD "+literal(c.password)); err != nil {
			return fmt.Errorf("create role %s: %w", c.name, err)
		}
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident(c.name)+" OWNER "+ident(c.name)); err != nil {
			return fmt.Errorf("create database %s: %w", c.name, err)
		}
		if _, err := conn.Exec(ctx, "REVOKE CONNECT, TEMPORARY ON DATABASE "+ident(c.name)+" FROM PUBLIC"); err != nil {
			return fmt.Errorf("revoke on %s: %w", c.name, err)
		}
		if ext == "" {
			return nil
		}
		db, err := b.connect(ctx, c.name)
		if err != nil {
			return err
		}
		defer closeConn(db)
		if _, err := db.Exec(ctx, "CREATE EXTENSION "+ident(ext)); err != nil {
			return fmt.Errorf("create extension %s in %s: %w", ext, c.name, err)
		}
		return nil
	})
}

// rawDrop is the floor of withdrawing cs with drop: the database (ending its sessions), then
// the role. ifExists makes it the clean-up between rounds, which finds some gone already.
func (b *bench) rawDrop(ctx context.Context, cs []string, p int, ifExists bool) error {
	maybe := ""
	if ifExists {
		maybe = "IF EXISTS "
	}
	return b.parallel(ctx, len(cs), p, func(ctx context.Context, conn *pgx.Conn, i int) error {
		if _, err := conn.Exec(ctx, "DROP DATABASE "+maybe+ident(cs[i])+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop database %s: %w", cs[i], err)
		}
		if _, err := conn.Exec(ctx, "DROP ROLE "+maybe+ident(cs[i])); err != nil {
			return fmt.Errorf("drop role %s: %w", cs[i], err)
		}
		return nil
	})
}

// rawCatalog is the floor of a start over consumers already made: one connection and one
// catalog query that reads every role, its stored verifier, and its database.
func (b *bench) rawCatalog(ctx context.Context, cs []string) error {
	conn, err := b.connect(ctx, "")
	if err != nil {
		return err
	}
	defer closeConn(conn)
	rows, err := conn.Query(ctx, `
SELECT r.rolname::text, r.rolpassword, r.rolcanlogin, d.datname::text,
       has_database_privilege('public', d.oid, 'CONNECT')
FROM pg_authid r JOIN pg_database d ON d.datdba = r.oid
WHERE r.rolname = ANY($1)`, cs)
	if err != nil {
		return fmt.Errorf("catalog query: %w", err)
	}
	var (
		role, db       string
		stored         *string
		login, connect bool
		n              int
	)
	if _, err := pgx.ForEachRow(rows, []any{&role, &stored, &login, &db, &connect}, func() error { n++; return nil }); err != nil {
		return fmt.Errorf("catalog query: %w", err)
	}
	if n != len(cs) {
		return fmt.Errorf("catalog query: %d rows, want %d", n, len(cs))
	}
	return nil
}

// cleanup drops what a round made and leaves the server as the next round should find it: the
// dead catalog rows vacuumed, a checkpoint taken and the machine's writes on disk (sync), so
// that neither side pays for the other's. The sync matters most to the withdraw workload: the
// kernel writes a file back some 30 s after it was written (vm.dirty_expire_centisecs), and
// dropping a database whose files are on disk frees their blocks, where one whose files were
// never written back costs almost nothing. Unsynced, the side that drops later (the daemon,
// after its hold) found its databases on disk and the other did not, which was the slow mode
// of issue 19; synced, both drop what a server's long-lived databases are: files on disk.
func (b *bench) cleanup(ctx context.Context, cs []string) error {
	if len(cs) > 0 {
		if err := b.rawDrop(ctx, cs, 4, true); err != nil {
			return fmt.Errorf("clean up: %w", err)
		}
	}
	conn, err := b.connect(ctx, "")
	if err != nil {
		return err
	}
	defer closeConn(conn)
	for _, sql := range []string{
		"VACUUM pg_catalog.pg_authid, pg_catalog.pg_auth_members, pg_catalog.pg_database, pg_catalog.pg_shdepend, pg_catalog.pg_shdescription",
		"CHECKPOINT",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("clean up: %s: %w", strings.Fields(sql)[0], err)
		}
	}
	syscall.Sync()
	return nil
}

// present counts which of cs have a login role and a database, and with ext, checks the last
// one's database has it: each round is checked to have done its work.
func (b *bench) present(ctx context.Context, cs []string, ext string) (roles, dbs int, err error) {
	conn, err := b.connect(ctx, "")
	if err != nil {
		return 0, 0, err
	}
	defer closeConn(conn)
	err = conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_roles WHERE rolname = ANY($1) AND rolcanlogin),
       (SELECT count(*) FROM pg_database WHERE datname = ANY($1))`, cs).Scan(&roles, &dbs)
	if err != nil {
		return 0, 0, fmt.Errorf("count what was made: %w", err)
	}
	if ext == "" || len(cs) == 0 || dbs == 0 {
		return roles, dbs, nil
	}
	db, err := b.connect(ctx, cs[len(cs)-1])
	if err != nil {
		return 0, 0, err
	}
	defer closeConn(db)
	var has bool
	if err := db.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_extension WHERE extname = $1)", ext).Scan(&has); err != nil {
		return 0, 0, fmt.Errorf("check %s: %w", ext, err)
	}
	if !has {
		return 0, 0, fmt.Errorf("database %s lacks extension %s", cs[len(cs)-1], ext)
	}
	return roles, dbs, nil
}

// expect fails unless every one of cs has its role and database (made) or none has (gone).
func (b *bench) expect(ctx context.Context, who string, cs []string, ext string, made bool) error {
	roles, dbs, err := b.present(ctx, cs, ext)
	if err != nil {
		return fmt.Errorf("%s: %w", who, err)
	}
	want := 0
	if made {
		want = len(cs)
	}
	if roles != want || dbs != want {
		return fmt.Errorf("%s: %d login roles and %d databases of the %d consumers, want %d of each", who, roles, dbs, len(cs), want)
	}
	return nil
}

// ident quotes a name; the names here are made by this program.
func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// literal quotes a string constant (standard_conforming_strings is on).
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
