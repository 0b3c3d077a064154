package postgres_test

import (
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/adapters/postgres"
)

func TestACreateStuckBehindSomebodysLockFailsAtTheLockTimeout(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	b := e.backendWith(postgres.Config{URL: e.srv.URL, LockTimeout: 300 * time.Millisecond})
	stuck, free := provision(name("stuck")), provision(name("free"))
	is.NoErr(errOf(b.Create(ctx, stuck)))
	// A session (an operator's, or the consumer's own: the key is no secret) holds the lock
	// the provider takes for this consumer, and a row lock on its role.
	holder := e.admin("")
	_, err := holder.Exec(ctx, "SELECT pg_advisory_lock(hashtextextended('novox-provisioner/' || $1, 0))", stuck.As)
	is.NoErr(err)

	start := time.Now()
	err = errOf(b.Create(ctx, stuck))
	is.True(err != nil)                                                                                // that attempt fails
	is.True(strings.Contains(err.Error(), "another session held a lock it needs for more than 300ms")) // and says why
	is.True(time.Since(start) < 10*time.Second)                                                        // at the lock timeout, not the create's two minutes
	is.NoErr(errOf(b.Create(ctx, free)))                                                               // others are not held up

	_, err = holder.Exec(ctx, "SELECT pg_advisory_unlock(hashtextextended('novox-provisioner/' || $1, 0))", stuck.As)
	is.NoErr(err)
	e.exec("", "ALTER ROLE "+stuck.As+" NOLOGIN") // drift Create must repair
	tx, err := holder.Begin(ctx)
	is.NoErr(err)
	_, err = tx.Exec(ctx, "ALTER ROLE "+stuck.As+" CONNECTION LIMIT 7") // an open transaction on the role itself
	is.NoErr(err)
	err = errOf(b.Create(ctx, stuck))
	is.True(err != nil && strings.Contains(err.Error(), "another session held a lock")) // the role's row, waited for no longer
	is.NoErr(tx.Rollback(ctx))
	is.NoErr(errOf(b.Create(ctx, stuck))) // tried again once it is free: done
	is.True(e.holds(stuck))
}
