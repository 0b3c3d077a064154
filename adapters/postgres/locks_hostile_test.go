package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/ports"
	"github.com/novox/postgres-provider/tests/poll"
)

// A consumer may log in to the provider's database (PUBLIC may connect to postgres by
// default), and there the provider's advisory lock keys are no secret. These tests are the
// attacks that follow from it.

// holdKey makes conn hold the advisory lock of the provider's key for arg, and one more
// session of the same login wait for it, as a consumer that wants the lock the moment it is
// free would.
func holdKey(t *testing.T, e *env, user, password, key, arg string) (holder, waiter *pgx.Conn) {
	t.Helper()
	is := is.New(t)
	holder, waiter = e.mustLogin(user, password, "postgres"), e.mustLogin(user, password, "postgres")
	_, err := holder.Exec(ctx, "SELECT pg_advisory_lock(hashtextextended("+key+" || $1, 0))", arg)
	is.NoErr(err)
	go func() {
		_, _ = waiter.Exec(context.Background(), "SELECT pg_advisory_lock(hashtextextended("+key+" || $1, 0))", arg)
	}()
	admin := e.admin("")
	defer admin.Close(ctx)
	waits := func() bool {
		var n int
		_ = admin.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND pid = $1",
			waiter.PgConn().PID()).Scan(&n)
		return n == 1
	}
	if !poll.Within(30*time.Second, waits) {
		t.Fatal("never: the second session waits for the lock")
	}
	return holder, waiter
}

// ended is whether the server ended c's session, as it sees it (the session's own connection
// may be busy waiting).
func (e *env) ended(c *pgx.Conn) bool {
	admin := e.admin("")
	defer admin.Close(ctx)
	alive := func() bool {
		var n int
		is.New(e.t).NoErr(admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", c.PgConn().PID()).Scan(&n))
		return n > 0
	}
	// Ending a session is a signal: it is gone a moment later.
	return poll.Within(10*time.Second, func() bool { return !alive() })
}

func TestAConsumerCannotHoldAnothersLock(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	attacker, victim := provision(name("holder")), provision(name("victim"))
	e.mustCreate(attacker)
	holder, waiter := holdKey(t, e, attacker.As, attacker.Password, "'novox-provisioner/'", victim.As)

	b := e.backendWith(postgres.Config{URL: e.srv.URL, LockTimeout: 10 * time.Second})
	is.NoErr(errOf(b.Create(ctx, victim))) // the victim is made all the same
	e.mustLogin(victim.As, victim.Password, victim.As)
	is.True(e.ended(holder) && e.ended(waiter)) // and the attacker's sessions that held and queued for its lock are gone
	said := strings.Join(e.log.said(), "\n")
	is.True(strings.Contains(said, victim.As+": ended session ")) // said, on the victim
	is.True(strings.Contains(said, " of "+attacker.As+", which is not a superuser and held or waited for the provider's lock of "+victim.As))
}

func TestAConsumerCannotHoldTheLease(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	attacker := provision(name("usurper"))
	e.mustCreate(attacker)
	resource := name("lease")
	holder, waiter := holdKey(t, e, attacker.As, attacker.Password, "'novox-provisioner-leader/'", resource)

	lease := e.backendWith(postgres.Config{URL: e.srv.URL, Resource: resource}).Lease()
	defer lease.Close()
	is.NoErr(lease.Held(ctx)) // the replica takes the lease, not stands by for ever
	is.True(lease.Leader())
	is.True(e.ended(holder) && e.ended(waiter))
	is.True(strings.Contains(strings.Join(e.log.said(), "\n"), "not a superuser and held or waited for the lease of "+resource))
}

func TestAnotherProvidersLockIsWaitedForNotEnded(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := provision(name("waited"))
	admin := e.admin("") // a superuser: another provider, another replica
	_, err := admin.Exec(ctx, "SELECT pg_advisory_lock(hashtextextended('novox-provisioner/' || $1, 0))", p.As)
	is.NoErr(err)
	b := e.backendWith(postgres.Config{URL: e.srv.URL, LockTimeout: 200 * time.Millisecond})
	err = errOf(b.Create(ctx, p))
	is.True(err != nil) // it waited, to its lock_timeout
	is.True(strings.Contains(err.Error(), "another session held a lock it needs"))
	is.NoErr(admin.Ping(ctx)) // the superuser's session was not ended
	_, err = admin.Exec(ctx, "SELECT pg_advisory_unlock(hashtextextended('novox-provisioner/' || $1, 0))", p.As)
	is.NoErr(err)
	is.NoErr(errOf(b.Create(ctx, p)))

	lease := e.backendWith(postgres.Config{URL: e.srv.URL, Resource: p.As}).Lease()
	defer lease.Close()
	_, err = admin.Exec(ctx, "SELECT pg_advisory_lock(hashtextextended('novox-provisioner-leader/' || $1, 0))", p.As)
	is.NoErr(err)
	is.True(errors.Is(lease.Held(ctx), ports.ErrStandby)) // a superuser's lease is another replica's
	is.NoErr(admin.Ping(ctx))                             // the superuser's session was not ended
}

func TestAConsumerCannotBlockItsOwnWithdrawal(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := provision(name("clinger"))
	e.mustCreate(p)
	// The consumer holds its own role's row in an open transaction, as any role may.
	consumer := e.mustLogin(p.As, p.Password, p.As)
	tx, err := consumer.Begin(ctx)
	is.NoErr(err)
	_, err = tx.Exec(ctx, "ALTER ROLE "+p.As+" PASSWORD 'clinging'")
	is.NoErr(err)

	b := e.backendWith(postgres.Config{URL: e.srv.URL, LockTimeout: 2 * time.Second})
	is.NoErr(b.Remove(ctx, p.As)) // withdrawn all the same
	var login bool
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT rolcanlogin FROM pg_roles WHERE rolname = $1", p.As).Scan(&login))
	is.True(!login)
	is.True(e.ended(consumer))
	_, err = e.login(p.As, p.Password, p.As)
	is.True(err != nil) // and stays out
}

// On a server where PUBLIC may create in public (the default before PostgreSQL 15), a consumer
// in the provider's database plants a function that outbids the catalog's on the lock calls.
func TestAFunctionPlantedInTheProvidersDatabaseNeverRunsAsSuperuser(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	attacker, other := provision(name("planter")), provision(name("other"))
	e.mustCreate(attacker)
	e.exec("", "GRANT CREATE ON SCHEMA public TO PUBLIC")
	t.Cleanup(func() { e.exec("", "REVOKE CREATE ON SCHEMA public FROM PUBLIC") })
	c := e.mustLogin(attacker.As, attacker.Password, "postgres")
	fn := "public.hashtextextended(text, integer)"
	_, err := c.Exec(ctx, `CREATE FUNCTION `+fn+` RETURNS bigint LANGUAGE sql AS
		'ALTER ROLE `+attacker.As+` SUPERUSER; SELECT 0::bigint'`)
	is.NoErr(err)
	t.Cleanup(func() { e.exec("", "DROP FUNCTION IF EXISTS "+fn) })
	// The attack works where the search path is the server's default, so the test can bite:
	// a superuser's own call runs it.
	tx, err := e.admin("").Begin(ctx)
	is.NoErr(err)
	_, err = tx.Exec(ctx, "SELECT hashtextextended('x', 0)")
	is.NoErr(err)
	var super bool
	is.NoErr(tx.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = $1", attacker.As).Scan(&super))
	is.True(super)
	is.NoErr(tx.Rollback(ctx))

	is.NoErr(errOf(e.b.Create(ctx, other)))
	is.NoErr(errOf(e.b.Create(ctx, attacker)))
	is.NoErr(e.b.Remove(ctx, other.As))
	lease := e.backendWith(postgres.Config{URL: e.srv.URL, Resource: attacker.As}).Lease()
	defer lease.Close()
	is.NoErr(lease.Held(ctx))
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = $1", attacker.As).Scan(&super))
	is.True(!super) // the provider's calls never ran it
}
