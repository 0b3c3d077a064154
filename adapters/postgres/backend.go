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
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/novox/postgres-provider/adapters/postgres/archive"
	"github.com/novox/postgres-provider/ports"
)

// Adopt is what Create does with a role that exists and is not in the record.
type Adopt string

const (
	// AdoptPlain takes over a plain login role (no superuser, no power to create roles,
	// replicate or bypass row security, not a member of a role that has one, nor of a
	// predefined pg_ role), as the provider before the record made them; any other is refused.
	AdoptPlain Adopt = "plain"
	// AdoptNone refuses every role the record does not name.
	AdoptNone Adopt = "none"
)

// Config is how to reach the server and what to do on withdrawal.
type Config struct {
	// URL is the provider's superuser connection, as a URL or key=value string. Empty takes
	// libpq's PG* variables and defaults.
	URL string
	// Resource is the requirement this provider serves: the record is kept per resource, so
	// that providers of different resources on one server never touch each other's consumers.
	// Empty is "postgres".
	Resource string
	// Adopt is AdoptPlain (the default) or AdoptNone.
	Adopt Adopt
	// Log is where the adapter says what an operator needs to know (an extension skipped). The
	// facts it tells of a consumer (ports.Entry.Once) are told each time they are found: give
	// it the loop's domain.Told, as app does, for each to be said once.
	Log ports.Logger
	// Timeout bounds one Create, Remove or Drop, waiting for the consumer's lock included; zero is
	// DefaultTimeout. HoldsAll is bounded by its caller.
	Timeout time.Duration
	// MaxConnections is the most connections the Backend holds to the server at once: its pool,
	// and the short-lived ones to consumers' databases (half of them each, at least one). Zero
	// is DefaultMaxConnections.
	MaxConnections int
	// AllowExtensions are the extensions consumers may have; nil lets them have every one the
	// server has available. One not allowed is said and skipped, like one not available.
	AllowExtensions []string
	// AllowSettings are the settings a consumer's entry may name (derived.settings); nil is
	// DefaultAllowSettings, empty allows none. Each must pass CheckAllowSetting.
	AllowSettings []string
	// ConnectionLimit is each role's CONNECTION LIMIT where derived names none; zero means
	// none (-1), as does -1.
	ConnectionLimit int
	// LockTimeout is how long a statement of Create, Remove or Drop waits for a lock another
	// session holds (an operator's open transaction on the role, or the consumer's own) before
	// that attempt fails; zero is DefaultLockTimeout.
	LockTimeout time.Duration
	// Database is the database the provider's own sessions use, and so where its lease and its
	// per-login locks live (advisory locks are per database): every replica must name the same
	// one, whatever database its URL names. Empty is DefaultDatabase. A template database is
	// refused: a session there makes every CREATE DATABASE fail.
	Database string
	// ReadOnly makes every session of the Backend refuse writes (default_transaction_read_only,
	// set once the URL's own test of the session passed): the server itself then keeps a Backend
	// that only looks (provisioner plan) from changing anything. Create, Remove and Drop fail on
	// it.
	ReadOnly bool
	// Archive, where set, archives each database before Drop drops it (archives.go), at most
	// ArchiveParallel at once (zero: one).
	Archive         *archive.Archiver
	ArchiveParallel int
}

// DefaultMaxConnections is Config.MaxConnections' default: enough for eight consumers at once,
// each on a pooled connection and one to its database.
const DefaultMaxConnections = 16

// DefaultLockTimeout is Config.LockTimeout's default: longer than any lock the provider's own
// statements hold, short enough that a consumer stuck behind somebody's open transaction does
// not hold up the pass.
const DefaultLockTimeout = 5 * time.Second

// DefaultTimeout is Config.Timeout's default, a daemon's for every backend: long enough for
// CREATE DATABASE on a busy server, short enough that a server that stopped answering does not
// stall the loop.
const DefaultTimeout = ports.DefaultTimeout

// defaultConnectTimeout applies where the URL names no connect_timeout: a server whose packets
// are dropped fails the attempt rather than hanging it.
const defaultConnectTimeout = 10 * time.Second

// Backend provisions consumers on one PostgreSQL server. It is safe for concurrent use.
type Backend struct {
	pool     *pgxpool.Pool
	resource string
	adopt    Adopt
	voice    voice  // says the adapter's lines, and tells its facts of consumers to be said once
	self     string // the provider's own role, never given to a consumer
	home     string // the database of the provider's own sessions (the pool's)
	// reach names the server in what is said, and knows which of the URL's hosts the sessions
	// last reached.
	reach    *reach
	readOnly bool // every session refuses writes (Config.ReadOnly); nothing is written, not even a record in the current format

	// rules are what the configuration asks of an entry (names, connection limit, settings).
	rules entryRules
	// conns opens connections to consumers' databases, beside the pool.
	conns databaseConns
	// ext makes, keeps current and refuses consumers' extensions.
	ext *extensionPath
	// locks takes a consumer's lock for each act on it.
	locks *loginLocks

	// archives are the dumps taken before drops; nil where drops are not archived.
	archives *archives

	// verified remembers which stored verifiers a password was checked against, so that a
	// verify pass does not run PBKDF2 (4096 rounds) per consumer while nothing changed.
	verified verifiedCache
	// role is the provider's mode and the server's version, as last read.
	role atomic.Pointer[serverRole]
	// major is the server's major version, 0 until a session of the pool started.
	major atomic.Int32
	// blocked are the superusers' prepared transactions found in the provider's way.
	blocked blockedBy
	// sizes are the consumers' databases as Usage last sized them.
	sizes sizes
}

var (
	_ ports.Backend     = (*Backend)(nil)
	_ ports.Server      = (*Backend)(nil)
	_ ports.UsageReader = (*Backend)(nil)
)

// New returns a Backend for cfg. It does not connect: a server that is down now is reached
// once it is up.
func New(cfg Config) (*Backend, error) {
	switch cfg.Adopt {
	case "":
		cfg.Adopt = AdoptPlain
	case AdoptPlain, AdoptNone:
	default:
		return nil, fmt.Errorf("adopt %q: want plain or none", cfg.Adopt)
	}
	if cfg.Resource == "" {
		cfg.Resource = "postgres"
	}
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		// pgx's text quotes the URL, redacted only where it could parse it: a password that
		// broke the parse (an unescaped @, :, / or #) would be printed in part.
		return nil, errors.New("database url: cannot be parsed; a password holding @, :, /, ? or # must be " +
			"percent-encoded (%40, %3A, %2F, %3F, %23)")
	}
	if err := checkHosts(pc.ConnConfig); err != nil {
		return nil, err
	}
	if cfg.Database == "" {
		cfg.Database = DefaultDatabase
	}
	if cfg.Database == "template0" || cfg.Database == "template1" {
		return nil, fmt.Errorf("database %s is a template: a session of the provider there makes every CREATE DATABASE "+
			"fail; name another (%s is the default)", cfg.Database, DefaultDatabase)
	}
	named := pc.ConnConfig.Database
	pc.ConnConfig.Database = cfg.Database
	pc.MaxConnIdleTime = 5 * time.Minute
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.LockTimeout <= 0 {
		cfg.LockTimeout = DefaultLockTimeout
	}
	pooled := max(1, (cfg.MaxConnections+1)/2)
	pc.MaxConns = int32(pooled)
	lockTimeout := strconv.FormatInt(cfg.LockTimeout.Milliseconds(), 10) + "ms"
	// Every session starts from a known state, whatever a consumer or an operator set for a
	// database or a role. search_path above all: nothing the provider runs as a superuser in its
	// own database resolves to an object a consumer could make there (a server that lets PUBLIC
	// create in public, the default before PostgreSQL 15, would otherwise let a consumer's
	// public.hashtextextended(text, integer) outbid the catalog's on the lock calls).
	knownState(pc.ConnConfig.RuntimeParams, pc.ConnConfig.User, lockTimeout)
	if pc.ConnConfig.RuntimeParams["application_name"] == "" { // which provider, and where (databaseConns.application)
		host, _ := os.Hostname()
		pc.ConnConfig.RuntimeParams["application_name"] = fmt.Sprintf("novox-provisioner/%s/%s-%d", cfg.Resource, host, os.Getpid())
	}
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.AllowSettings == nil {
		cfg.AllowSettings = DefaultAllowSettings
	}
	for _, name := range cfg.AllowSettings {
		if err := CheckAllowSetting(name); err != nil {
			return nil, fmt.Errorf("allow settings: %w", err)
		}
	}
	var b *Backend
	// Every connection, pooled or not (the lease's, a consumer's database's), copies this: the
	// server's version is read as it lets the provider in, an older one than OldestMajor
	// refused, and the major remembered (the settings an older server does not know are left
	// out of the sessions opened to consumers' databases).
	pc.ConnConfig.AfterConnect = func(ctx context.Context, c *pgconn.PgConn) error {
		if err := b.serverChecked(ctx, c); err != nil {
			return err
		}
		b.reach.note(ctx, c)
		return nil
	}
	if cfg.ReadOnly {
		pc.ConnConfig.AfterConnect = readOnlyAfter(pc.ConnConfig.AfterConnect)
	}
	pc.ConnConfig.ValidateConnect = validating(pc.ConnConfig.ValidateConnect)
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	cc := pc.ConnConfig
	b = &Backend{pool: pool, resource: cfg.Resource, adopt: cfg.Adopt, voice: voice{cfg.Log}, self: cc.User,
		home: cfg.Database, reach: newReach(cc), readOnly: cfg.ReadOnly}
	b.conns = databaseConns{slots: make(chan struct{}, max(1, cfg.MaxConnections-pooled)), base: cc, reach: b.reach, major: &b.major,
		readOnly: cfg.ReadOnly}
	b.rules = entryRules{self: b.self, limit: limitOrNone(cfg.ConnectionLimit), allowedSettings: cfg.AllowSettings}
	b.locks = &loginLocks{pool: pool, timeout: cfg.Timeout, wait: cfg.LockTimeout, reach: b.reach, conns: &b.conns, voice: b.voice,
		blocked: &b.blocked}
	b.ext = &extensionPath{allowed: cfg.AllowExtensions, self: b.self, conns: &b.conns}
	if cfg.Archive != nil {
		b.archives = newArchives(b, cfg.Archive, cfg.ArchiveParallel)
	}
	if named != "" && named != cfg.Database {
		b.voice.say(slog.LevelInfo, "", "the connection URL names database %s; the provider's sessions, its lease and its locks use %s, "+
			"as every replica's do", named, cfg.Database)
	}
	return b, nil
}

// checkHosts refuses a URL whose host holds an @: a password with an unescaped @ is split there,
// and the rest of it taken for the host, which every line about the server would print.
func checkHosts(cc *pgx.ConnConfig) error {
	hosts := []string{cc.Host}
	for _, f := range cc.Fallbacks {
		hosts = append(hosts, f.Host)
	}
	for _, h := range hosts {
		if strings.Contains(h, "@") {
			return errors.New("database url: its host holds an @, which is likely part of the password: a password " +
				"holding @ must be percent-encoded (%40)")
		}
	}
	return nil
}

// Close ends the Backend's connections.
func (b *Backend) Close() {
	if b.archives != nil {
		b.archives.stop() // a dump under way is killed; its partial archive never looks whole
	}
	b.pool.Close()
}

// Server names the server and the provider's role on it, user@host:port, never a password.
func (b *Backend) Server() string { return b.reach.server }

// Ping reports whether the server can be reached, and where not why, as Managed would.
func (b *Backend) Ping(ctx context.Context) error {
	if b.blocked.text() == "" {
		if err := b.pool.Ping(ctx); err != nil {
			return b.reach.serverError(err)
		}
		return nil
	}
	// A superuser's prepared transaction was in the provider's way: the same round trip asks
	// whether it still is.
	rows, err := b.pool.Query(ctx, "SELECT database::text, gid FROM pg_catalog.pg_prepared_xacts")
	if err != nil {
		return b.reach.serverError(err)
	}
	still := map[[2]string]bool{}
	var db, gid string
	if _, err := pgx.ForEachRow(rows, []any{&db, &gid}, func() error { still[[2]string{db, gid}] = true; return nil }); err != nil {
		return b.reach.serverError(err)
	}
	b.blocked.keep(still)
	return nil
}

// Leadership is the Backend's Lease, as a daemon holds it.
func (b *Backend) Leadership() ports.Leadership { return b.Lease() }

// Blocked is why the provider cannot finish what it does while a superuser's prepared
// transaction it found in its way lasts (as Ping last found), "" where there is none.
func (b *Backend) Blocked() string { return b.blocked.text() }

func limitOrNone(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}
