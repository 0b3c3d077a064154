// Package postgres is the Backend that provisions consumers on a PostgreSQL server with pgx: a
// login role under the minted password (sent as a SCRAM-SHA-256 verifier computed here), a
// database the role owns that no one else may connect to, and the extensions the consumer
// names, created as the provider's superuser because untrusted ones (vector) need it.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/novox/postgres-provider/ports"
)

// Policy is what Remove does with a consumer the mesh no longer lists.
type Policy string

const (
	// Retain takes the login away and ends its sessions; the database and its data stay, and a
	// later Create gives the login back.
	Retain Policy = "retain"
	// Drop ends the sessions, drops the database and then the role. Nothing is left.
	Drop Policy = "drop"
)

// SQLSTATEs this adapter tells apart.
const (
	undefinedObject   = "42704"
	duplicateDatabase = "42P04"
)

// Config is how to reach the server and what to do on withdrawal.
type Config struct {
	// URL is the provider's superuser connection, as a URL or key=value string. Empty takes
	// libpq's PG* variables and defaults.
	URL string
	// OnWithdraw is Retain (the default) or Drop.
	OnWithdraw Policy
	// Log is where the adapter says what an operator needs to know (an extension skipped).
	Log ports.Logger
	// Timeout bounds one Create or Remove, waiting for the consumer's lock included; zero is
	// DefaultTimeout. Holds is bounded by its caller.
	Timeout time.Duration
}

// DefaultTimeout is Config.Timeout's default: long enough for CREATE DATABASE on a busy
// server, short enough that a server that stopped answering does not stall the loop.
const DefaultTimeout = 2 * time.Minute

// defaultConnectTimeout applies where the URL names no connect_timeout: a server whose packets
// are dropped fails the attempt rather than hanging it.
const defaultConnectTimeout = 10 * time.Second

// Backend provisions consumers on one PostgreSQL server. It is safe for concurrent use.
type Backend struct {
	pool    *pgxpool.Pool
	policy  Policy
	timeout time.Duration
	log     ports.Logger
	self    string // the provider's own role, never given to a consumer

	// verified remembers which stored verifiers a password was checked against, so that a
	// verify pass does not run PBKDF2 (4096 rounds) per consumer while nothing changed.
	verified verifiedCache
}

var _ ports.Backend = (*Backend)(nil)

// New returns a Backend for cfg. It does not connect: a server that is down now is reached
// once it is up.
func New(cfg Config) (*Backend, error) {
	switch cfg.OnWithdraw {
	case "":
		cfg.OnWithdraw = Retain
	case Retain, Drop:
	default:
		return nil, fmt.Errorf("on-withdraw %q: want retain or drop", cfg.OnWithdraw)
	}
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	pc.MaxConnIdleTime = 5 * time.Minute
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	return &Backend{pool: pool, policy: cfg.OnWithdraw, timeout: cfg.Timeout, log: cfg.Log, self: pc.ConnConfig.User}, nil
}

// Close ends the Backend's connections.
func (b *Backend) Close() { b.pool.Close() }

// Ping reports whether the server can be reached.
func (b *Backend) Ping(ctx context.Context) error { return b.pool.Ping(ctx) }

// Superuser reports whether the provider's own role is a superuser, which creating untrusted
// extensions and reading stored password verifiers need.
func (b *Backend) Superuser(ctx context.Context) (bool, error) {
	var super bool
	err := b.pool.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super)
	return super, err
}

// Create brings the consumer's role, database and extensions into being, or back to exactly
// what p says. Every name is checked before the first statement. Creates of one consumer,
// from this process or another provider on the same server, are serialised by an advisory lock.
func (b *Backend) Create(ctx context.Context, p ports.Provision) error {
	pl, err := b.planOf(p)
	if err != nil {
		return err
	}
	if p.Password == "" {
		return fmt.Errorf("create role %s: the minted password is empty", pl.role)
	}
	verifier, err := scramVerifier(p.Password)
	if err != nil {
		return fmt.Errorf("create role %s: %w", pl.role, err)
	}
	return b.locked(ctx, pl.role, func(ctx context.Context, conn *pgxpool.Conn) error {
		if err := ensureRole(ctx, conn, pl.role, verifier); err != nil {
			return fmt.Errorf("create role %s: %w", pl.role, err)
		}
		if err := ensureDatabase(ctx, conn, pl.database, pl.role); err != nil {
			return fmt.Errorf("create database %s: %w", pl.database, err)
		}
		return b.ensureExtensions(ctx, conn, pl)
	})
}

// locked runs fn on one connection while it holds the advisory lock for the consumer's login,
// all within the Backend's timeout. The lock is the server's, so two providers, or two Creates
// here, never interleave on one consumer.
func (b *Backend) locked(ctx context.Context, role string, fn func(context.Context, *pgxpool.Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Release()
	const key = "SELECT hashtextextended('novox-provisioner/' || $1, 0)"
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(("+key+"))", role); err != nil {
		return fmt.Errorf("lock %s: %w", role, err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, "SELECT pg_advisory_unlock(("+key+"))", role); err != nil {
			// A session that cannot unlock must not go back to the pool holding the lock.
			_ = conn.Conn().Close(uctx)
		}
	}()
	return fn(ctx, conn)
}

// ensureRole creates the role or brings it back to LOGIN with no powers and the verifier as its
// password, in a transaction that keeps the statement out of the server's log, even if it
// fails, and out of pg_stat_statements.
func ensureRole(ctx context.Context, conn *pgxpool.Conn, role, verifier string) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// One round trip: the settings (local to this transaction: is_local true), and whether
		// the role exists. pg_stat_statements' is a placeholder where it is not loaded.
		var exists bool
		err := tx.QueryRow(ctx, `SELECT set_config('log_statement', 'none', true),
       set_config('log_min_error_statement', 'panic', true),
       set_config('log_min_duration_statement', '-1', true),
       set_config('pg_stat_statements.track_utility', 'off', true),
       EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`, role).Scan(nil, nil, nil, nil, &exists)
		if err != nil {
			return err
		}
		verb := "CREATE"
		if exists {
			verb = "ALTER"
		}
		_, err = tx.Exec(ctx, verb+" ROLE "+ident(role)+" WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE"+
			" NOREPLICATION NOBYPASSRLS VALID UNTIL 'infinity' PASSWORD "+literal(verifier))
		return err
	})
}

// ensureDatabase creates the database owned by role, or checks that role owns it; a database
// owned by another role is never handed over. PUBLIC loses CONNECT and TEMPORARY on it.
func ensureDatabase(ctx context.Context, conn *pgxpool.Conn, db, role string) error {
	owner, err := ownerOf(ctx, conn, db)
	if err != nil {
		return err
	}
	if owner == "" {
		_, err := conn.Exec(ctx, "CREATE DATABASE "+ident(db)+" OWNER "+ident(role))
		if pgCode(err) == duplicateDatabase {
			// Made by someone else since we looked; whose it is decides.
			owner, err = ownerOf(ctx, conn, db)
		}
		if err != nil {
			return err
		}
		if owner == "" {
			owner = role
		}
	}
	if owner != role {
		return fmt.Errorf("the database exists and is owned by %q, not %q; it is not handed over", owner, role)
	}
	_, err = conn.Exec(ctx, "REVOKE CONNECT, TEMPORARY ON DATABASE "+ident(db)+" FROM PUBLIC")
	return err
}

// ownerOf is the name of db's owner, or "" where there is no such database.
func ownerOf(ctx context.Context, conn *pgxpool.Conn, db string) (string, error) {
	var owner string
	err := conn.QueryRow(ctx, "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = $1", db).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return owner, err
}

// ensureExtensions creates, in the consumer's database and as the provider, each named
// extension the server has available, with what it depends on. One the server lacks is said
// and skipped.
func (b *Backend) ensureExtensions(ctx context.Context, conn *pgxpool.Conn, pl plan) error {
	if len(pl.extensions) == 0 {
		return nil
	}
	available, err := availableOf(ctx, conn, pl.extensions)
	if err != nil {
		return fmt.Errorf("list available extensions: %w", err)
	}
	for _, name := range pl.extensions {
		if !available[name] {
			b.say(slog.LevelWarn, pl.role, "%s: extension %s is not available on this server; skipped", pl.role, name)
		}
	}
	if len(available) == 0 {
		return nil
	}
	db, err := b.connectTo(ctx, pl.database, false)
	if err != nil {
		return fmt.Errorf("create extensions in %s: %w", pl.database, err)
	}
	defer db.Close(context.WithoutCancel(ctx))
	for _, name := range pl.extensions {
		if !available[name] {
			continue
		}
		if _, err := db.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS "+ident(name)+" CASCADE"); err != nil {
			return fmt.Errorf("create extension %s in %s: %w", name, pl.database, err)
		}
	}
	return nil
}

// availableOf is which of names the server has available.
func availableOf(ctx context.Context, q querier, names []string) (map[string]bool, error) {
	rows, err := q.Query(ctx, "SELECT name FROM pg_available_extensions WHERE name = ANY($1)", names)
	if err != nil {
		return nil, err
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(found))
	for _, name := range found {
		out[name] = true
	}
	return out, nil
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// connectTo opens a connection to db as the provider; readOnly ones refuse every write.
func (b *Backend) connectTo(ctx context.Context, db string, readOnly bool) (*pgx.Conn, error) {
	cfg := b.pool.Config().ConnConfig.Copy()
	cfg.Database = db
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	// The consumer owns its database and may have made a schema named after the provider's
	// role, which "$user" would put first: extensions go to public unless their control file
	// names a schema.
	cfg.RuntimeParams["search_path"] = "public"
	if readOnly {
		cfg.RuntimeParams["default_transaction_read_only"] = "on"
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// Holds reports whether the role exists with LOGIN and no powers, is not past its VALID UNTIL,
// has a stored password made from p's, owns the database, which PUBLIC cannot connect to, and
// whether every named extension the server has available is installed there. It changes
// nothing: one query for the role and database facts, and only where extensions are named, a
// read-only connection to the consumer's database.
func (b *Backend) Holds(ctx context.Context, p ports.Provision) (bool, error) {
	pl, err := b.planOf(p)
	if err != nil {
		return false, err
	}
	var (
		roleOK, dbOK bool
		stored       *string
		available    []string // nil where none are named
	)
	err = b.pool.QueryRow(ctx, `
SELECT coalesce(r.rolcanlogin AND NOT (r.rolsuper OR r.rolcreatedb OR r.rolcreaterole OR r.rolreplication OR r.rolbypassrls)
                AND coalesce(r.rolvaliduntil > now(), true), false),
       r.rolpassword,
       coalesce(d.datdba = r.oid AND NOT has_database_privilege('public', d.oid, 'CONNECT'), false),
       CASE WHEN cardinality($3::text[]) > 0 -- listing what is available reads every control file
            THEN ARRAY(SELECT name::text FROM pg_available_extensions WHERE name = ANY($3::text[])) END
FROM (VALUES (1)) AS one (x)
LEFT JOIN pg_authid r ON r.rolname = $1
LEFT JOIN pg_database d ON d.datname = $2`,
		pl.role, pl.database, orNone(pl.extensions)).Scan(&roleOK, &stored, &dbOK, &available)
	if err != nil {
		return false, fmt.Errorf("check role %s: %w", pl.role, err)
	}
	if !roleOK || !dbOK || stored == nil || !b.verified.verifies(*stored, p.Password, pl.role) {
		return false, nil
	}
	if len(available) == 0 {
		return true, nil
	}
	db, err := b.connectTo(ctx, pl.database, true)
	if err != nil {
		return false, fmt.Errorf("check extensions in %s: %w", pl.database, err)
	}
	defer db.Close(context.WithoutCancel(ctx))
	var installed int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM pg_extension WHERE extname = ANY($1)", available).Scan(&installed); err != nil {
		return false, fmt.Errorf("check extensions in %s: %w", pl.database, err)
	}
	return installed == len(available), nil
}

// Remove withdraws the login as. Retain: the role loses LOGIN and its sessions end; the
// database stays. Drop: sessions end, the role's database (derived.database, else every one it
// owns) is dropped, then the role. Both are no-ops for what is already gone.
func (b *Backend) Remove(ctx context.Context, as string, derived map[string]any) error {
	if err := b.checkName("login", as); err != nil {
		return err
	}
	named, err := databaseOf("", nil, derived)
	if err != nil {
		return err
	}
	if named != "" {
		if err := b.checkName("database", named); err != nil {
			return err
		}
	}
	return b.locked(ctx, as, func(ctx context.Context, conn *pgxpool.Conn) error {
		if b.policy == Retain {
			_, err := conn.Exec(ctx, "ALTER ROLE "+ident(as)+" NOLOGIN")
			if pgCode(err) == undefinedObject {
				return nil
			}
			if err != nil {
				return fmt.Errorf("withdraw login %s: %w", as, err)
			}
			return endSessions(ctx, conn, as)
		}
		if err := endSessions(ctx, conn, as); err != nil {
			return err
		}
		rows, err := conn.Query(ctx, `SELECT datname::text FROM pg_database
WHERE datdba = (SELECT oid FROM pg_roles WHERE rolname = $1) AND ($2 = '' OR datname = $2)`, as, named)
		if err != nil {
			return fmt.Errorf("list databases of %s: %w", as, err)
		}
		dbs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("list databases of %s: %w", as, err)
		}
		for _, db := range dbs {
			if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(db)+" WITH (FORCE)"); err != nil {
				return fmt.Errorf("drop database %s: %w", db, err)
			}
		}
		if _, err := conn.Exec(ctx, "DROP ROLE IF EXISTS "+ident(as)); err != nil {
			return fmt.Errorf("drop role %s: %w", as, err)
		}
		return nil
	})
}

// endSessions ends every session of role.
func endSessions(ctx context.Context, conn *pgxpool.Conn, role string) error {
	_, err := conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1 AND pid <> pg_backend_pid()", role)
	if err != nil {
		return fmt.Errorf("end sessions of %s: %w", role, err)
	}
	return nil
}

func (b *Backend) say(level slog.Level, consumer, format string, args ...any) {
	if b.log != nil {
		b.log.Log(ports.Entry{Level: level, Consumer: consumer, Message: fmt.Sprintf(format, args...)})
	}
}

// ident quotes a name that checkName or checkExtension has let through.
func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// literal quotes a string constant for the statements that take no parameters (ALTER ROLE).
// The server runs with standard_conforming_strings on (its default since 9.1): only quotes need
// doubling.
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func orNone(names []string) []string {
	if names == nil {
		return []string{}
	}
	return names
}

// pgCode is err's SQLSTATE, or "" where err is not from the server.
func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}
