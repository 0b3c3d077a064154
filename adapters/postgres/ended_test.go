package postgres_test

import (
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/adapters/postgres"
)

// TestEndedSessionIsSaidOncePerConsumerAndCause: a consumer that keeps taking another's lock
// has its sessions ended each time, and that is said once (issue 19: 48 lines in 20 s).
func TestEndedSessionIsSaidOncePerConsumerAndCause(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	attacker, victim := provision(name("again")), provision(name("target"))
	e.mustCreate(attacker)
	b := e.backendWith(postgres.Config{URL: e.srv.URL, LockTimeout: 10 * time.Second})
	for range 2 {
		holder, waiter := holdKey(t, e, attacker.As, attacker.Password, "'novox-provisioner/'", victim.As)
		is.NoErr(errOf(b.Create(ctx, victim)))
		is.True(e.ended(holder) && e.ended(waiter)) // two sessions ended, twice over
	}
	n := 0
	for _, line := range e.log.said() {
		if strings.HasPrefix(line, victim.As+": ended session ") {
			n++
		}
	}
	is.Equal(n, 1) // said once
}
