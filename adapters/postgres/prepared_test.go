package postgres_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/ports"
	"github.com/novox/postgres-provider/tests/poll"
)

// A prepared transaction keeps its locks, and the rows it changed, with no session to end. These
// tests need a server that allows them (max_prepared_transactions > 0; the shared one allows 5).

// prepare runs sql in a transaction on conn and prepares it as gid; it is rolled back with the
// test where it is still there.
func (e *env) prepare(conn *pgx.Conn, gid string, sql string, args ...any) {
	e.t.Helper()
	is := is.New(e.t)
	var allowed int
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT current_setting('max_prepared_transactions')::int").Scan(&allowed))
	if allowed == 0 {
		e.t.Skip("the server allows no prepared transactions (max_prepared_transactions = 0)")
	}
	db := conn.Config().Database
	_, err := conn.Exec(ctx, "BEGIN")
	is.NoErr(err)
	_, err = conn.Exec(ctx, sql, args...)
	is.NoErr(err) // in the transaction
	quoted := "'" + strings.ReplaceAll(gid, "'", "''") + "'"
	_, err = conn.Exec(ctx, "PREPARE TRANSACTION "+quoted)
	is.NoErr(err) // prepared
	e.t.Cleanup(func() {
		admin := e.admin(db)
		if e.prepared(gid) {
			_, _ = admin.Exec(ctx, "ROLLBACK PREPARED "+quoted)
		}
	})
}

// prepared is whether the prepared transaction gid is there.
func (e *env) prepared(gid string) bool {
	e.t.Helper()
	var n int
	is.New(e.t).NoErr(e.admin("").QueryRow(ctx, "SELECT count(*) FROM pg_prepared_xacts WHERE gid = $1", gid).Scan(&n))
	return n > 0
}

func (e *env) saidOf(part string) bool {
	return strings.Contains(strings.Join(e.log.said(), "\n"), part)
}

func TestAConsumersPreparedTransactionOnTheLeaseIsRolledBack(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	attacker := provision(name("preparer"))
	e.mustCreate(attacker)
	// A name the consumer chose, with a quote and a backslash: the provider's rollback names it
	// as it is.
	resource, gid := name("lease"), name("gid")+`\' x`
	e.prepare(e.mustLogin(attacker.As, attacker.Password, "postgres"), gid,
		"SELECT pg_advisory_xact_lock(hashtextextended('novox-provisioner-leader/' || $1, 0))", resource)

	lease := e.backendWith(postgres.Config{URL: e.srv.URL, Resource: resource}).Lease()
	defer lease.Close()
	is.NoErr(lease.Held(ctx)) // the replica takes the lease, not stands by for ever
	is.True(!e.prepared(gid)) // the consumer's prepared transaction is rolled back
	is.True(e.saidOf(`rolled back prepared transaction ` + strconv.Quote(gid) + ` of ` + attacker.As + `, which is not a superuser and held the lease of ` + resource))
}

func TestAConsumersPreparedTransactionOnAnothersLockIsRolledBack(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	attacker, victim := provision(name("preparer")), provision(name("victim"))
	e.mustCreate(attacker)
	gid := name("gid")
	e.prepare(e.mustLogin(attacker.As, attacker.Password, "postgres"), gid,
		"SELECT pg_advisory_xact_lock(hashtextextended('novox-provisioner/' || $1, 0))", victim.As)

	b := e.backendWith(postgres.Config{URL: e.srv.URL, LockTimeout: 10 * time.Second})
	is.NoErr(errOf(b.Create(ctx, victim))) // the victim is made all the same
	e.mustLogin(victim.As, victim.Password, victim.As)
	is.True(!e.prepared(gid))
	is.True(e.saidOf(victim.As + `: rolled back prepared transaction "` + gid + `" of ` + attacker.As +
		`, which is not a superuser and held the provider's lock of ` + victim.As))
}

func TestAConsumersPreparedTransactionOnItsRoleDoesNotKeepItsLogin(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := provision(name("clinger"))
	e.mustCreate(p)
	gid := name("gid")
	e.prepare(e.mustLogin(p.As, p.Password, p.As), gid, "ALTER ROLE "+p.As+" PASSWORD 'clinging'")

	b := e.backendWith(postgres.Config{URL: e.srv.URL, LockTimeout: 2 * time.Second})
	is.NoErr(b.Remove(ctx, p.As)) // withdrawn all the same
	var login bool
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT rolcanlogin FROM pg_roles WHERE rolname = $1", p.As).Scan(&login))
	is.True(!login)
	is.True(!e.prepared(gid)) // rolled back, in the consumer's database, where it was prepared
	is.True(e.saidOf(p.As + `: rolled back prepared transaction "` + gid + `" of ` + p.As + `, which is not a superuser and held the row of role ` + p.As))
	_, err := e.login(p.As, "clinging", p.As)
	is.True(err != nil) // its password never came
}

func TestASuperusersPreparedTransactionIsSaidAndWaitedFor(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := provision(name("blocked"))
	gid := name("gid")
	e.prepare(e.admin(""), gid, "SELECT pg_advisory_xact_lock(hashtextextended('novox-provisioner/' || $1, 0))", p.As)

	b := e.backendWith(postgres.Config{URL: e.srv.URL, LockTimeout: 300 * time.Millisecond})
	is.True(errOf(b.Create(ctx, p)) != nil) // waited for, to the lock timeout
	is.True(e.prepared(gid))                // not the provider's to undo
	is.True(e.saidOf(`prepared transaction "` + gid + `" of the superuser `))
	is.NoErr(b.Ping(ctx))
	is.True(strings.Contains(b.Blocked(), `prepared transaction "`+gid+`"`)) // not ready while it lasts
	e.exec("", "ROLLBACK PREPARED '"+gid+"'")
	is.NoErr(b.Ping(ctx))
	is.Equal(b.Blocked(), "") // and ready once it is gone
	is.NoErr(errOf(b.Create(ctx, p)))

	resource, gid := name("lease"), name("gid")
	e.prepare(e.admin(""), gid, "SELECT pg_advisory_xact_lock(hashtextextended('novox-provisioner-leader/' || $1, 0))", resource)
	lease := e.backendWith(postgres.Config{URL: e.srv.URL, Resource: resource}).Lease()
	defer lease.Close()
	err := lease.Held(ctx)
	is.True(err != nil && !errors.Is(err, ports.ErrStandby)) // the server's problem, said as one, not a standby's quiet
	is.True(strings.Contains(err.Error(), `prepared transaction "`+gid+`" of the superuser`))
	is.True(e.prepared(gid))
	e.exec("", "ROLLBACK PREPARED '"+gid+"'")
	is.NoErr(lease.Held(ctx))
}

// TestAStandbyEndsNothing: while a replica holds the lease, another that asks for it ends no
// session, not even a consumer's that waits for the lease's key.
func TestAStandbyEndsNothing(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := provision(name("waiter"))
	e.mustCreate(p)
	resource := name("lease")
	cfg := postgres.Config{URL: e.srv.URL, Resource: resource}
	leader := e.backendWith(cfg).Lease()
	defer leader.Close()
	is.NoErr(leader.Held(ctx))
	waiter := e.mustLogin(p.As, p.Password, "postgres")
	pid := waiter.PgConn().PID()
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = waiter.Exec(wctx, "SELECT pg_advisory_lock(hashtextextended('novox-provisioner-leader/' || $1, 0))", resource)
	}()
	defer func() { stop(); <-done }() // the wait given up before the connection is closed
	admin := e.admin("")
	is.True(poll.Within(30*time.Second, func() bool {
		var n int
		_ = admin.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND pid = $1", pid).Scan(&n)
		return n == 1
	})) // the consumer waits for the lease's key

	standby := e.backendWith(cfg).Lease()
	defer standby.Close()
	is.True(errors.Is(standby.Held(ctx), ports.ErrStandby))
	var alive int
	is.NoErr(admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&alive))
	is.Equal(alive, 1) // the standby ended nothing
	is.True(!e.saidOf("ended session"))
}
