package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/ports"
	"github.com/novox/postgres-provider/tests/pgserver"
	"github.com/novox/postgres-provider/tests/poll"
)

// TestATrojanInThePublicSchemaNeverRunsAsSuperuser: the consumer plants public.upper(varchar),
// which records who runs it and tries to make the consumer a superuser, then asks for an
// extension whose script calls upper() unqualified, as third-party scripts do.
func TestATrojanInThePublicSchemaNeverRunsAsSuperuser(t *testing.T) {
	e := newEnv(t)
	trojan(t, e, e.b, "novox_trojan_test", false)
}

// trojan sets the trap of TestATrojanInThePublicSchemaNeverRunsAsSuperuser for a consumer b
// makes, has b create the extension ext (trusted or not: a trusted one's script runs as the
// bootstrap superuser for a role that is not one), and asserts that the planted function never
// ran as a superuser; it answers the consumer.
func trojan(t *testing.T, e *env, b *postgres.Backend, ext string, trusted bool) ports.Provision {
	t.Helper()
	is := is.New(t)
	e.srv.InstallExtension(e.t, map[string]string{
		ext + ".control": fmt.Sprintf(`comment = 'calls upper() unqualified, for the tests of the provider'
default_version = '1.0'
relocatable = true
superuser = true
trusted = %t
`, trusted),
		ext + "--1.0.sql": `\echo Use "CREATE EXTENSION ` + ext + `" to load this file. \quit
CREATE FUNCTION novox_trojan_probe() RETURNS text LANGUAGE sql AS $$ SELECT 'probe' $$;
SELECT upper('probe'::varchar);
`,
	})
	p := provision(name("trojan"))
	is.NoErr(errOf(b.Create(ctx, p)))
	e.plantUpper(p)
	_, err := e.mustLogin(p.As, p.Password, p.As).Exec(ctx, "SELECT upper('self-test'::varchar)")
	is.NoErr(err) // the trap works when the consumer calls it itself
	var before int
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT count(*) FROM pg_roles WHERE rolsuper").Scan(&before))

	p.Values["extensions"] = []any{ext}
	is.NoErr(errOf(b.Create(ctx, p)))
	is.True(contains(e.extensions(p.As), ext)) // the extension was created
	var supers, ranAsSuper, ranAtAll int
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT count(*) FROM pg_roles WHERE rolsuper").Scan(&supers))
	is.Equal(supers, before) // no role gained any power
	is.NoErr(e.admin(p.As).QueryRow(ctx, "SELECT count(*) FILTER (WHERE super), count(*) FROM public.who_ran").Scan(&ranAsSuper, &ranAtAll))
	is.Equal(ranAsSuper, 0) // the planted function never ran as a superuser
	is.Equal(ranAtAll, 1)   // only when the consumer called it itself
	var schema string
	is.NoErr(e.admin(p.As).QueryRow(ctx, "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = $1", ext).Scan(&schema))
	is.Equal(schema, "extensions")
	return p
}

// logSize is how much the server has logged so far.
func (e *env) logSize() int {
	e.t.Helper()
	raw, err := e.srv.Local.Log()
	is.New(e.t).NoErr(err)
	return len(raw)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestADatabaseLeftBetweenCreateAndRevokeIsOpenToNobody covers the two states a kill between
// CREATE DATABASE and the REVOKE could leave: created not accepting connections (today's
// order), and open to every login (the old order), with another consumer's session in it.
func TestADatabaseLeftBetweenCreateAndRevokeIsOpenToNobody(t *testing.T) {
	t.Run("created not accepting connections", func(t *testing.T) {
		is := is.New(t)
		e := newEnv(t)
		p, other := provision(name("half")), provision(name("other"))
		e.mustCreate(p)
		e.mustCreate(other)
		e.exec("", "DROP DATABASE "+p.As+" WITH (FORCE)", "CREATE DATABASE "+p.As+" OWNER "+p.As+" ALLOW_CONNECTIONS false")
		_, err := e.login(other.As, other.Password, p.As)
		is.True(err != nil) // nobody gets in
		h, err := holdsOne(ctx, e.b, p)
		is.NoErr(err)
		is.True(!h.Held)
		is.True(contains(h.Drift, "connections not allowed") && contains(h.Drift, "open to others")) // and the check says why
		e.mustCreate(p)
		e.mustLogin(p.As, p.Password, p.As) // the owner, once repaired
		_, err = e.login(other.As, other.Password, p.As)
		is.Equal(sqlstate(err), "42501") // and still nobody else
	})
	t.Run("open to every login, with an intruder in", func(t *testing.T) {
		is := is.New(t)
		e := newEnv(t)
		p, other := provision(name("open")), provision(name("intruder"))
		e.mustCreate(p)
		e.mustCreate(other)
		e.exec("", "GRANT CONNECT ON DATABASE "+p.As+" TO PUBLIC")
		intruder := e.mustLogin(other.As, other.Password, p.As)
		owner := e.mustLogin(p.As, p.Password, p.As)
		h, err := holdsOne(ctx, e.b, p)
		is.NoErr(err)
		is.Equal(h.Drift, []string{"open to others"})
		e.mustCreate(p)
		_, err = intruder.Exec(ctx, "SELECT 1")
		is.True(err != nil) // the intruder's session was ended
		_, err = e.login(other.As, other.Password, p.As)
		is.Equal(sqlstate(err), "42501") // and it cannot come back
		_, err = owner.Exec(ctx, "SELECT 1")
		is.NoErr(err) // the owner's session stays
		is.True(strings.Contains(strings.Join(e.log.said(), "\n"), "1 session(s) of others in it were ended"))
	})
}

func TestTheVerifierIsNotLoggedWhenStatementsAreSampled(t *testing.T) {
	is := is.New(t)
	if !pgserver.Available() {
		t.Skip("a server of the test's own is needed, and this machine has no server binaries")
	}
	dir, err := os.MkdirTemp("", "provisioner-server-")
	is.NoErr(err)
	defer os.RemoveAll(dir)
	is.NoErr(os.Chmod(dir, 0o755))
	srv, err := pgserver.Start(pgserver.Options{Dir: dir + "/pg", Settings: map[string]string{
		"log_min_duration_sample": "0", "log_statement_sample_rate": "1", "log_transaction_sample_rate": "1"}})
	is.NoErr(err)
	defer srv.Stop()
	e := &env{t: t, srv: &pgserver.TestServer{URL: srv.URL, Local: srv}, log: &recLogger{}}
	e.b = e.backend(srv.URL)
	p := provision(name("sampled"), "pg_trgm")
	e.mustCreate(p)
	p.Password = "rotated-" + randomHex(8)
	e.mustCreate(p) // its verifier rewritten
	e.exec("", "SELECT 'sampling is on: "+p.As+"'")
	raw, err := srv.Log()
	is.NoErr(err)
	log := string(raw)
	is.True(strings.Contains(log, "statement: SELECT 'sampling is on: "+p.As+"'")) // sampled statements are logged, so the check can bite
	is.True(!strings.Contains(log, "SCRAM-SHA-256$"))                              // never the verifier
	is.True(!strings.Contains(log, p.Password))
}

func TestAMonitorNeverSeesAVerifierInPgStatActivity(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	monitor := name("monitor")
	e.exec("", "CREATE ROLE "+monitor+" LOGIN PASSWORD 'monitor-pw'", "GRANT pg_monitor TO "+monitor)
	watch := e.mustLogin(monitor, "monitor-pw", "postgres")
	var provider string
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT current_user").Scan(&provider))

	stop := make(chan struct{})
	var seen, leaked atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // what a pg_monitor member reads of the provider's sessions, as often as it can
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			rows, err := watch.Query(ctx, "SELECT query FROM pg_stat_activity WHERE usename = $1 AND pid <> pg_backend_pid()", provider)
			if err != nil {
				continue
			}
			for rows.Next() {
				var q string
				if rows.Scan(&q) == nil && q != "" {
					seen.Add(1)
					if strings.Contains(q, "SCRAM-SHA-256$") {
						leaked.Add(1)
					}
				}
			}
			rows.Close()
		}
	}()
	p := provision(name("watched"))
	for i := range 40 { // creates in a loop, each rewriting the verifier
		p.Password = fmt.Sprintf("pw-%d-%s", i, randomHex(4))
		e.mustCreate(p)
	}
	close(stop)
	wg.Wait()
	is.True(seen.Load() > 0)          // the monitor saw the provider's statements, so the check can bite
	is.Equal(leaked.Load(), int64(0)) // never a verifier
}

func TestADeadlockReportDoesNotCarryTheVerifier(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	if e.srv.Local == nil {
		t.Skip("the server's log can be read only for a server these tests started")
	}
	p := provision(name("deadlock"))
	e.mustCreate(p)
	from := e.logSize()
	// The consumer, in an open transaction, holds its own role's row and waits for the lock
	// the provider takes for it: its key is no secret, and advisory locks are per database, so
	// it connects to the provider's (PUBLIC may connect to postgres by default).
	consumer := e.mustLogin(p.As, p.Password, "postgres")
	tx, err := consumer.Begin(ctx)
	is.NoErr(err)
	_, err = tx.Exec(ctx, "ALTER ROLE "+p.As+" PASSWORD 'the-consumers-own'")
	is.NoErr(err)
	rotated := p
	rotated.Password = "rotated-" + randomHex(8)
	b := e.backendWith(postgres.Config{URL: e.srv.URL, LockTimeout: 20 * time.Second})
	created := make(chan error, 1)
	go func() { created <- errOf(b.Create(ctx, rotated)) }() // it waits for the consumer's row
	// One connection asks, however long the wait.
	admin := e.admin("")
	if !poll.Within(30*time.Second, func() bool {
		var n int
		_ = admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND application_name LIKE 'novox-provisioner/%'").Scan(&n)
		return n > 0
	}) {
		t.Fatal("the provider never waited for the consumer's row")
	}
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, lockErr := tx.Exec(lctx, "SELECT pg_advisory_lock(hashtextextended('novox-provisioner/' || $1, 0))", p.As)
	createErr := <-created
	t.Logf("the consumer's lock: %v; the create: %v", lockErr, createErr)
	is.True(sqlstate(lockErr) == "40P01" || sqlstate(createErr) == "40P01") // a deadlock, broken by the server
	_ = tx.Rollback(ctx)
	raw, err := e.srv.Local.Log()
	is.NoErr(err)
	log := string(raw[from:])                           // what this test made the server say
	is.True(strings.Contains(log, "deadlock detected")) // reported in the log
	is.True(!strings.Contains(log, "SCRAM-SHA-256$"))   // without the verifier
	is.True(!strings.Contains(log, rotated.Password))
}

func TestAllowExtensionsRefusesWhatItDoesNotName(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	b := e.backendWith(postgres.Config{URL: e.srv.URL, AllowExtensions: []string{"pg_trgm", "vector"}})
	p := provision(name("allow"), "dblink", "pg_trgm")
	lacks := []string{"extension dblink: not allowed on this server (--allow-extensions)"}
	for range 2 {
		var incomplete *ports.Incomplete
		is.True(errors.As(errOf(b.Create(ctx, p)), &incomplete)) // made without it
		is.Equal(incomplete.Lacks, lacks)
	}
	is.Equal(e.extensions(p.As), []string{"pg_trgm", "plpgsql"})                                                              // dblink refused, pg_trgm created
	is.Equal(e.log.said(), []string{p.As + ": extension dblink is not allowed on this server (--allow-extensions); skipped"}) // said once
	h, err := holdsOne(ctx, b, p)
	is.NoErr(err)
	is.True(h.Held)          // a refused extension is not required
	is.Equal(h.Lacks, lacks) // but it is lacked
}

func TestTheConnectionLimitIsSetCheckedAndRepaired(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	b := e.backendWith(postgres.Config{URL: e.srv.URL, ConnectionLimit: 5})
	limit := func(role string) int {
		var n int
		is.NoErr(e.admin("").QueryRow(ctx, "SELECT rolconnlimit FROM pg_roles WHERE rolname = $1", role).Scan(&n))
		return n
	}
	p, q := provision(name("limit")), provision(name("limit"))
	q.Derived = map[string]any{"connection_limit": 2.0}
	is.NoErr(errOf(b.Create(ctx, p)))
	is.NoErr(errOf(b.Create(ctx, q)))
	is.Equal(limit(p.As), 5) // the flag's
	is.Equal(limit(q.As), 2) // derived's wins
	e.mustCreate(provision(name("limit")))

	e.exec("", "ALTER ROLE "+p.As+" CONNECTION LIMIT 1") // behind the provider's back
	h, err := holdsOne(ctx, b, p)
	is.NoErr(err)
	is.Equal(h.Drift, []string{"connection limit"}) // seen, and named
	is.NoErr(errOf(b.Create(ctx, p)))
	is.Equal(limit(p.As), 5) // repaired

	bad := provision(name("limit"))
	bad.Derived = map[string]any{"connection_limit": "lots"}
	err = errOf(b.Create(ctx, bad))
	is.Equal(err.Error(), "derived.connection_limit is lots, not a whole number of connections (-1 for no limit)")
}

func TestAnExtensionAlreadyInPublicStaysAndIsSaidOnce(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := provision(name("legacy"))
	e.mustCreate(p)
	e.exec(p.As, "CREATE EXTENSION pg_trgm SCHEMA public") // as the provider before this one made it
	p.Values["extensions"] = []any{"pg_trgm"}
	e.mustCreate(p)
	e.mustCreate(p)
	var schema string
	is.NoErr(e.admin(p.As).QueryRow(ctx, "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'pg_trgm'").Scan(&schema))
	is.Equal(schema, "public")     // left where it is
	is.Equal(len(e.log.said()), 1) // and said once
	is.True(strings.Contains(e.log.said()[0], "extension pg_trgm is installed in schema public of "+p.As+", where the consumer can write"))
	is.True(e.holds(p))
}
