package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
	"github.com/novox/postgres-provider/tests/pgserver"
)

func TestMain(m *testing.M) { os.Exit(pgserver.Main(m)) }

var ctx = context.Background()

// recLogger keeps what the adapter says.
type recLogger struct {
	mu    sync.Mutex
	lines []string
}

func (l *recLogger) Log(e ports.Entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, e.Message)
}

func (l *recLogger) said() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// env is one test's view of the shared server.
type env struct {
	t   testing.TB
	srv *pgserver.TestServer
	log *recLogger
	// told is log as app wires it: what a backend tells of a consumer once, said once.
	told     *domain.Told
	toldOnce sync.Once
	b        *postgres.Backend
	pm       int // the server's postmaster, once serverCPU has found it
}

func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{t: t, srv: pgserver.Shared(t), log: &recLogger{}}
	e.b = e.backend(e.srv.URL)
	return e
}

// newEnvOwn is an env on a server of the test's own, stopped with the test, for a test whose
// scale would slow every other on the shared server (20,000 roles lengthen each scan of the
// catalog's roles); the shared server where this machine has no server binaries.
func newEnvOwn(t testing.TB) *env {
	t.Helper()
	if !pgserver.Available() {
		t.Log("no server binaries on this machine: on the shared server")
		return newEnv(t)
	}
	s, err := pgserver.Start(pgserver.Options{})
	is.New(t).NoErr(err) // a server of its own
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stop the test's own server: %v", err)
		}
	})
	e := &env{t: t, srv: &pgserver.TestServer{URL: s.URL, Local: s}, log: &recLogger{}}
	e.b = e.backend(e.srv.URL)
	return e
}

// backend is another Backend on the server, with its own URL.
func (e *env) backend(url string) *postgres.Backend {
	e.t.Helper()
	return e.backendWith(postgres.Config{URL: url})
}

// backendWith is another Backend as cfg says, saying what it says to the env's logger.
func (e *env) backendWith(cfg postgres.Config) *postgres.Backend {
	e.t.Helper()
	cfg.Log = e.logger()
	b, err := postgres.New(cfg)
	is.New(e.t).NoErr(err) // backend
	e.t.Cleanup(b.Close)
	return b
}

// logger is where the env's backends say their lines: the env's log, through the loop's
// memory of what was said once, one for the whole test as app has one for the process.
func (e *env) logger() ports.Logger {
	e.toldOnce.Do(func() { e.told = domain.NewTold(e.log) })
	return e.told
}

var serial atomic.Int64
var run = randomHex(3) // names from earlier runs on a shared server never meet ours

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// name is a fresh consumer name, unique in this run and across runs.
func name(base string) string { return fmt.Sprintf("%s_%s_%d", base, run, serial.Add(1)) }

// provision is a consumer whose database is named after it, asking for extensions.
func provision(as string, extensions ...string) ports.Provision {
	exts := make([]any, len(extensions))
	for i, x := range extensions {
		exts[i] = x
	}
	return ports.Provision{As: as, Password: "pw-" + randomHex(8), Values: map[string]any{"name": as, "extensions": exts}, Derived: map[string]any{}}
}

// admin is a superuser connection to db ("" for postgres), closed with the test.
func (e *env) admin(db string) *pgx.Conn {
	e.t.Helper()
	cfg, err := pgx.ParseConfig(e.srv.URL)
	is.New(e.t).NoErr(err) // parse url
	if db != "" {
		cfg.Database = db
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	is.New(e.t).NoErr(err) // admin connection
	e.t.Cleanup(func() { conn.Close(ctx) })
	return conn
}

// exec runs statements as the superuser in db.
func (e *env) exec(db string, sql ...string) {
	e.t.Helper()
	conn := e.admin(db)
	for _, s := range sql {
		_, err := conn.Exec(ctx, s)
		if err != nil {
			e.t.Fatalf("%s: %v", s, err)
		}
	}
}

// login connects as user with password to db, through the server's SCRAM authentication.
func (e *env) login(user, password, db string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(e.srv.URL)
	if err != nil {
		return nil, err
	}
	cfg.User, cfg.Password, cfg.Database = user, password, db
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(c, cfg)
	if err == nil {
		e.t.Cleanup(func() { conn.Close(ctx) })
	}
	return conn, err
}

func (e *env) mustLogin(user, password, db string) *pgx.Conn {
	e.t.Helper()
	conn, err := e.login(user, password, db)
	if err != nil {
		e.t.Fatalf("log in as %s to %s: %v", user, db, err)
	}
	return conn
}

func (e *env) mustCreate(p ports.Provision) {
	e.t.Helper()
	if err := errOf(e.b.Create(ctx, p)); err != nil {
		e.t.Fatalf("create %s: %v", p.As, err)
	}
}

// holdsOne is b's check of p alone, bounded as a Create is.
func holdsOne(ctx context.Context, b *postgres.Backend, p ports.Provision) (ports.Holding, error) {
	p.Login = true // the password checked, by a login where that is how
	answer := b.HoldsAll(ctx, []ports.Provision{p}, postgres.DefaultTimeout)[0]
	return answer.Holding, answer.Err
}

func (e *env) holds(p ports.Provision) bool {
	e.t.Helper()
	held, err := holdsOne(ctx, e.b, p)
	if err != nil {
		e.t.Fatalf("holds %s: %v", p.As, err)
	}
	return held.Held
}

// catalog is every role and database on the server, to show that nothing changed.
func (e *env) catalog() string {
	e.t.Helper()
	var roles, dbs []string
	conn := e.admin("")
	rows, _ := conn.Query(ctx, "SELECT rolname::text FROM pg_roles")
	roles, err := pgx.CollectRows(rows, pgx.RowTo[string])
	is.New(e.t).NoErr(err) // roles
	rows, _ = conn.Query(ctx, "SELECT datname::text FROM pg_database")
	dbs, err = pgx.CollectRows(rows, pgx.RowTo[string])
	is.New(e.t).NoErr(err) // databases
	sort.Strings(roles)
	sort.Strings(dbs)
	return strings.Join(roles, ",") + " | " + strings.Join(dbs, ",")
}

// extensions are the extensions installed in db.
func (e *env) extensions(db string) []string {
	e.t.Helper()
	rows, _ := e.admin(db).Query(ctx, "SELECT extname::text FROM pg_extension ORDER BY 1")
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	is.New(e.t).NoErr(err) // extensions
	return names
}

func (e *env) available(ext string) bool {
	e.t.Helper()
	var ok bool
	is.New(e.t).NoErr(e.admin("").QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = $1)", ext).Scan(&ok))
	return ok
}

// errOf is Create's error, where a test asks only whether it failed.
func errOf(_ ports.Act, err error) error { return err }
