package domain_test

import (
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

// standbyErr is what the adapter answers where the server it reached is a standby: its own
// words, of kinds ErrInRecovery and ErrTransient.
type standbyErr struct{}

func (standbyErr) Error() string {
	return "the server postgres@127.0.0.1:5433 is a standby (read only)"
}
func (standbyErr) Unwrap() []error { return []error{ports.ErrInRecovery, ports.ErrTransient} }

var inRecovery error = standbyErr{}

func TestAStandbyLeaseIsOneLineAndNothingIsAttempted(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	l := &askless{err: inRecovery}
	w.lease = l
	w.configure(domain.Config{})
	w.write("/s/a", "pw")
	w.contributions(consumer("a", "/s/a"))
	for range 5 {
		r := w.pass(time.Second)
		is.Equal(r.ServerProblem, inRecovery.Error()) // the reason /readyz gives
		is.Equal(r.Failures, 0)                       // no failure counted
		is.True(!r.Converged())
	}
	is.Equal(w.log.take(), []string{inRecovery.Error() + "; nothing is created, checked or withdrawn until it is promoted " +
		"or the URL names a primary"}) // said once
	is.Equal(w.backend.createsOf("a"), 0) // no create attempted
	is.Equal(w.backend.managed, 0)        // nor anything else asked
	is.Equal(len(w.backend.removes), 0)   // nor withdrawn
	l.err = nil                           // promoted
	w.pass(time.Second)
	is.Equal(w.backend.createsOf("a"), 1) // acted on at the next pass
}

func TestAStandbyBackendWithoutALeaseIsOneLine(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/a", "pw")
	w.contributions(consumer("a", "/s/a"))
	w.backend.managedErr = inRecovery
	for range 5 {
		r := w.pass(time.Minute)
		is.Equal(r.ServerProblem, inRecovery.Error())
		is.Equal(r.Failures, 0)
	}
	is.Equal(w.log.take(), []string{inRecovery.Error() + "; nothing is created, checked or withdrawn until it is promoted " +
		"or the URL names a primary"}) // said once
	is.Equal(w.backend.createsOf("a"), 0)
	w.backend.managedErr = nil
	w.pass(time.Second)
	is.Equal(w.backend.createsOf("a"), 1)
	is.Equal(w.log.take()[0], "the backend can be used again (it was: "+inRecovery.Error()+")")

	w.configure(domain.Config{Once: true})
	w.backend.managedErr = inRecovery
	r := w.pass(time.Second)
	is.True(!r.Converged())
	is.Equal(w.log.take(), []string{inRecovery.Error() + "; nothing was created, checked or withdrawn"}) // under --once
}
