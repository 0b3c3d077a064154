package domain_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/ports"
)

// kindOf is an error of a kind, as a backend marks its own: its text is err's, and it wraps
// both.
type kindOf struct{ err, kind error }

func (k kindOf) Error() string   { return k.err.Error() }
func (k kindOf) Unwrap() []error { return []error{k.err, k.kind} }

// A backend that says no cause: what consumers share is the error wrapped innermost, through
// wrappers that name the consumer and errors marked with their kind, read from the errors'
// chain, not from their text.
func TestACauseABackendDoesNotSayIsTheErrorWrappedInnermost(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/a", "pw-a")
	w.write("/s/b", "pw-b")
	w.contributions(consumer("a", "/s/a"), consumer("b", "/s/b"))
	w.pass(0)
	w.log.take()
	w.backend.holdsFn = func(_ context.Context, p ports.Provision) error {
		inner := fmt.Errorf("derived.settings of %s: %w", p.As, errors.New("setting work_mem: its value holds a control character"))
		return fmt.Errorf("check %s: %w", p.As, kindOf{err: inner, kind: ports.ErrTransient})
	}
	r := w.pass(time.Minute)
	is.Equal(w.log.take(), []string{"could not check the backend for 2 consumers (a, b), will ask again: " +
		"setting work_mem: its value holds a control character"}) // one line for both
	is.Equal(r.Status[1].LastError, "check b: derived.settings of b: setting work_mem: its value holds a control character") // each keeps its own
}

// A consumer that newly meets a cause already said for others is counted into it at once,
// named first, rather than at the line's next repeat (its 240th pass); the same consumers
// meeting it again are not said again.
func TestAConsumerNewlyMeetingACauseIsCountedIntoItAtOnce(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	for _, as := range []string{"a", "b", "c"} {
		w.write("/s/"+as, "pw-"+as)
	}
	w.contributions(consumer("a", "/s/a"), consumer("b", "/s/b"), consumer("c", "/s/c"))
	w.pass(0)
	w.log.take()
	failing := map[string]bool{"a": true, "b": true}
	w.backend.holdsFn = func(_ context.Context, p ports.Provision) error {
		if failing[p.As] {
			return &ports.SharedError{Err: fmt.Errorf("check %s: no slot", p.As), Cause: "no connection slot left"}
		}
		return nil
	}
	w.pass(time.Minute)
	is.Equal(w.log.take(), []string{"could not check the backend for 2 consumers (a, b), will ask again: no connection slot left"})
	w.pass(time.Minute)
	is.Equal(len(w.log.take()), 0) // the same two: said once
	w.backend.mu.Lock()
	failing["c"] = true
	w.backend.mu.Unlock()
	w.pass(time.Minute)
	is.Equal(w.log.take(), []string{"could not check the backend for 3 consumers (c, a, b), will ask again: no connection slot left"}) // c counted in at once
	w.pass(time.Minute)
	is.Equal(len(w.log.take()), 0)
}
