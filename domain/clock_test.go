package domain_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/domain"
)

// leavingOf is what a Report says of the consumer as the file no longer lists.
func leavingOf(t *testing.T, r domain.Report, as string) domain.Leaving {
	t.Helper()
	for _, l := range r.Leaving {
		if l.As == as {
			return l
		}
	}
	t.Fatalf("%s is not leaving in %+v", as, r.Leaving)
	return domain.Leaving{}
}

// A wall clock stepped by 25 h puts the record's times (written by the wall clock) 25 h ahead
// of, or behind, the loop's own clock. What /status, the lines and the plan say of when a drop
// falls due is the rule the loop acts on, never negative nor already past: /status's drop_at
// is when the loop drops, the line's "withdrawn ... ago" is at least the delay, and the plan
// never says a drop is due that the loop keeps without saying it is the earliest.
func TestDueTimesComeFromTheClockThatDecides(t *testing.T) {
	const after = 24 * time.Hour
	for _, skew := range []time.Duration{25 * time.Hour, -25 * time.Hour} {
		t.Run(fmt.Sprint("record's clock ", skew), func(t *testing.T) {
			is := is.New(t)
			w := twoApplied(t)
			w.backend.now = func() time.Time { return w.clk.Now().Add(skew) } // the wall clock, stepped
			cfg := domain.Config{OnWithdraw: domain.Drop, DropAfter: after}
			w.configure(cfg)
			w.pass(0)
			w.contributions(consumer("a", "/s/a")) // b leaves
			w.pass(0)
			is.Equal(w.pass(settle).Withdrawn, 1)
			withdrawn := w.clk.Now()
			r := w.pass(time.Minute) // a verify pass: the record read again, with its time
			l := leavingOf(t, r, "b")
			now := w.clk.Now()
			is.True(!l.Since.After(now))       // withdrawn, never in the future
			is.True(!l.Since.After(withdrawn)) // and no later than the loop saw it
			is.True(l.DropAt.After(now))       // due, never already past
			dropAt := l.DropAt

			p := previewOf(t, w, cfg)
			is.True(planned(t, p, "b").Earliest)                                        // the plan's time is the earliest
			is.True(!planned(t, p, "b").At.After(dropAt))                               // never later than the loop's
			is.True(planned(t, p, "b").At.IsZero() || planned(t, p, "b").At.After(now)) // never past

			for w.clk.Now().Add(time.Hour).Before(dropAt) {
				r = w.pass(time.Hour)
				l = leavingOf(t, r, "b")
				is.Equal(l.DropAt, dropAt) // the same due time on every pass
			}
			w.pass(dropAt.Sub(w.clk.Now()) - time.Second)
			is.Equal(len(w.backend.drops), 0) // kept until its drop_at
			w.log.take()
			w.pass(time.Second)
			is.Equal(w.backend.drops, []string{"b"})                                                   // dropped at its drop_at
			is.Equal(w.log.take(), []string{"b: withdrawn 49h0m0s ago; dropping it from the backend"}) // never negative
		})
	}
}

// A withdrawal due but waiting on something else (its remove failing) shows its due time as
// now, not a time already past.
func TestAWithdrawalPastDueIsShownDueNow(t *testing.T) {
	is := is.New(t)
	w := twoApplied(t)
	w.backend.removeErr = errors.New("connection reset")
	w.contributions(consumer("a", "/s/a"))
	w.pass(0)
	w.pass(settle)
	r := w.pass(time.Hour)
	l := leavingOf(t, r, "b")
	is.Equal(l.State, domain.LeavingFailing)
	is.Equal(l.WithdrawAt, w.clk.Now()) // due now, not an hour ago
}
