package postgres_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/ports"
)

func TestOneReplicaHoldsTheLeaseAndAnotherTakesItWhenItsSessionEnds(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	resource := name("lease")
	one := e.backendWith(postgres.Config{URL: e.srv.URL, Resource: resource}).Lease()
	two := e.backendWith(postgres.Config{URL: e.srv.URL, Resource: resource}).Lease()
	other := e.backendWith(postgres.Config{URL: e.srv.URL, Resource: resource + "-other"}).Lease()
	defer one.Close()
	defer two.Close()
	defer other.Close()

	is.NoErr(one.Held(ctx))                             // the first takes it
	is.NoErr(one.Held(ctx))                             // and keeps it
	is.True(errors.Is(two.Held(ctx), ports.ErrStandby)) // the second stands by
	is.NoErr(other.Held(ctx))                           // another resource's is another lease
	is.True(one.Leader() && !two.Leader())

	// The leader's session ends under it (a network drop, an operator's pg_terminate_backend).
	// pg_terminate_backend returns once the signal is sent; with a timeout, it waits (up to 10 s)
	// for the session to be gone, and its advisory lock with it, and says whether it went.
	var ended bool
	is.NoErr(e.admin("").QueryRow(ctx, `SELECT pg_terminate_backend(a.pid, 10000) FROM pg_stat_activity a
		JOIN pg_locks l ON l.pid = a.pid AND l.locktype = 'advisory' AND l.granted
		WHERE a.application_name LIKE 'novox-provisioner/' || $1 || '/%/lease'`, resource).Scan(&ended))
	is.True(ended) // the session is gone, and its lock
	err := one.Held(ctx)
	is.True(errors.Is(err, ports.ErrStandby)) // it notices before it acts again, and steps back
	is.True(!one.Leader())
	is.NoErr(two.Held(ctx)) // the other takes over
	is.True(errors.Is(one.Held(ctx), ports.ErrStandby))
	is.True(strings.Contains(strings.Join(e.log.said(), "\n"), "lost the lease of "+resource))
	is.True(strings.Contains(strings.Join(e.log.said(), "\n"), "standing by: another replica holds the lease of "+resource))
}
