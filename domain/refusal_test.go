package domain_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

// Issue 39, case 2: a check the backend refuses (a setting an operator took off the allowed list
// since the consumer was made) is a refusal in the line and in /status, as the plan says it, not
// "could not check the backend" and unchecked; said once, and over at the check that is answered.
func TestACheckTheBackendRefusesIsSaidAsARefusal(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.list("a")
	w.pass(0)
	w.log.take()
	offList := fmt.Errorf("check a: setting work_mem: not allowed on this server (--allow-settings): %w", ports.ErrInvalid)
	w.backend.holdsFn = func(context.Context, ports.Provision) error { return offList }
	r := w.pass(time.Minute)
	is.Equal(r.Unchecked, 0) // the backend answered: this is no trouble with it
	is.Equal(r.Consumers["a"], domain.StateRefused)
	is.Equal(r.Status[0].LastError, offList.Error())
	is.Equal(w.log.take(), []string{"a: refused: " + offList.Error() + "; what was made for it is left as it is"})
	creates := w.backend.createsOf("a")
	w.pass(time.Minute)
	is.Equal(len(w.log.take()), 0)              // said once
	is.Equal(w.backend.createsOf("a"), creates) // and nothing made or taken away
	w.h.RetryNow()                              // SIGHUP: a pass that checks nothing still shows it refused
	is.Equal(w.pass(time.Second).Consumers["a"], domain.StateRefused)

	w.backend.holdsFn = nil // allowed again
	is.Equal(w.pass(time.Minute).Consumers["a"], domain.StateApplied)
}

// Several consumers refused alike at a check are said in one line, as a cause the backend has
// is; the refusal's line and the unreachable server's never mix.
func TestARefusalManyConsumersMeetIsOneLine(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.list("a", "b", "c")
	w.pass(0)
	w.log.take()
	w.backend.holdsFn = func(_ context.Context, p ports.Provision) error {
		if p.As == "c" {
			return &ports.SharedError{Err: fmt.Errorf("check c: no slot"), Cause: "no connection slot left"}
		}
		return fmt.Errorf("check %s: %w", p.As, kindOf{err: fmt.Errorf("setting work_mem: not allowed on this server (--allow-settings)"), kind: ports.ErrInvalid})
	}
	r := w.pass(time.Minute)
	is.Equal(w.log.take(), []string{
		"2 consumers (a, b) refused: setting work_mem: not allowed on this server (--allow-settings); what was made for them is left as it is",
		"c: could not check the backend, will ask again: check c: no slot",
	})
	is.Equal(r.Consumers["a"], domain.StateRefused)
	is.Equal(r.Consumers["b"], domain.StateRefused)
	is.Equal(r.Consumers["c"], domain.StateApplied) // unable to ask is not evidence of anything
	is.Equal(r.Unchecked, 1)
}
