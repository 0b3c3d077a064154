package domain_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

// loginWorld is a world whose backend checks passwords by logging in, with n consumers listed
// (c000 ...), its loop at the budget given.
func loginWorld(t *testing.T, n int, cfg domain.Config) (*world, []string) {
	t.Helper()
	w := newWorld(t)
	w.backend.byLogin = true
	w.configure(cfg)
	var names []string
	var entries []entry
	for i := range n {
		as := fmt.Sprintf("c%03d", i)
		names = append(names, as)
		w.write("/s/"+as, "pw-"+as)
		entries = append(entries, consumer(as, "/s/"+as))
	}
	w.contributions(entries...)
	return w, names
}

// runFor runs the loop as Run would (each pass after UntilNext) for d of the mock clock.
func (w *world) runFor(d time.Duration) {
	end := w.clk.Now().Add(d)
	w.pass(0)
	for w.clk.Now().Before(end) {
		w.pass(w.h.UntilNext())
	}
}

// loginsOf is every login the backend made, by consumer, in order.
func (w *world) loginsOf() map[string][]time.Time {
	w.backend.mu.Lock()
	defer w.backend.mu.Unlock()
	return byConsumer(w.backend.logins)
}

// mostInASecond is the most logins the backend made within any second.
func (w *world) mostInASecond() int {
	w.backend.mu.Lock()
	defer w.backend.mu.Unlock()
	return mostInASecond(w.backend.logins)
}

// byConsumer is when each of ls was made, by consumer, in order.
func byConsumer(ls []login) map[string][]time.Time {
	out := map[string][]time.Time{}
	for _, l := range ls {
		out[l.as] = append(out[l.as], l.at)
	}
	return out
}

// mostInASecond is the most of ls, in the order made, made within any second.
func mostInASecond(ls []login) int {
	most := 0
	for i, l := range ls {
		n := 0
		for _, m := range ls[i:] {
			if m.at.Sub(l.at) < time.Second {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// Logins are granted on their own budget: never more than the ceiling within a second, every
// consumer's password checked within the interval from its creation and from then on, spread
// evenly over the interval rather than in a burst each verify pass, while every other check is
// still made every verify pass.
func TestLoginChecksAreSpreadWithinTheirCeiling(t *testing.T) {
	is := is.New(t)
	const n, rate = 400, 2
	every := 10 * time.Minute
	w, names := loginWorld(t, n, domain.Config{Every: 5 * time.Second, VerifyEvery: time.Minute, LoginCheckEvery: every, LoginRate: rate})
	start := w.clk.Now()
	w.runFor(50 * time.Minute)
	end := w.clk.Now()

	is.True(w.mostInASecond() <= rate) // never more than the ceiling within a second
	logins := w.loginsOf()
	spread(t, "logins", logins, names, start, end, every)
	is.True(w.checksOf(names[n-1]) >= 49) // checked at every verify pass, not only at its logins
}

// spread fails t where made (what each of names had made, in order, between start and end)
// is not spread over every: each at least 5 times, first within every of start, last within
// every of end, never more than every apart; and, past the first round, no minute holds more
// than twice its even share.
func spread(t *testing.T, what string, made map[string][]time.Time, names []string, start, end time.Time, every time.Duration) {
	t.Helper()
	for _, as := range names {
		at := made[as]
		if len(at) < 5 || at[0].Sub(start) > every || end.Sub(at[len(at)-1]) > every {
			t.Fatalf("%s: %s at %v, not again and again within %s from %s to %s", as, what, at, every, start, end)
		}
		for i := 1; i < len(at); i++ {
			if gap := at[i].Sub(at[i-1]); gap > every {
				t.Fatalf("%s: %s between %s, more than the interval %s", as, gap, what, every)
			}
		}
	}
	share := len(names) * int(time.Minute) / int(every)
	for from := start.Add(every); from.Before(end.Add(-time.Minute)); from = from.Add(time.Minute) {
		k := 0
		for _, at := range made {
			for _, a := range at {
				if !a.Before(from) && a.Before(from.Add(time.Minute)) {
					k++
				}
			}
		}
		if k > 2*share {
			t.Fatalf("%d %s in the minute from %s, more than twice the even share %d", k, what, from.Sub(start), share)
		}
	}
}

// checksOf is how many checks the backend made of as.
func (w *world) checksOf(as string) int {
	w.backend.mu.Lock()
	defer w.backend.mu.Unlock()
	return count(w.backend.holdsCalls, as)
}

// count is how many of s are v.
func count(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// A start does not log in as every consumer at once: the consumers it confirms are checked
// without a login, and their logins spread over the interval from the start.
func TestLoginChecksAfterAStartAreSpread(t *testing.T) {
	is := is.New(t)
	const n, rate = 300, 3
	every := 10 * time.Minute
	cfg := domain.Config{Every: 5 * time.Second, VerifyEvery: time.Minute, LoginCheckEvery: every, LoginRate: rate}
	w, names := loginWorld(t, n, cfg)
	w.runFor(30 * time.Minute)
	w.configure(cfg) // a start: the backend holds them all
	w.backend.mu.Lock()
	w.backend.logins = nil
	w.backend.mu.Unlock()
	start := w.clk.Now()
	w.runFor(every)

	is.True(w.mostInASecond() <= rate) // no burst of logins at the start
	logins := w.loginsOf()
	for _, as := range names {
		is.True(len(logins[as]) >= 1)              // every password checked within the interval from the start
		is.True(logins[as][0].Sub(start) <= every) // its first login within the interval
	}
}

// A password changed behind the provider's back is found by the consumer's next login check
// and repaired, within the interval, though no verify pass before it logged in.
func TestPasswordChangedBehindItsBackIsFoundByItsLoginCheck(t *testing.T) {
	is := is.New(t)
	every := 10 * time.Minute
	w, names := loginWorld(t, 50, domain.Config{Every: 5 * time.Second, VerifyEvery: time.Minute, LoginCheckEvery: every})
	w.runFor(15 * time.Minute)
	as := names[17]
	w.backend.mu.Lock()
	m := w.backend.store[as]
	m.p.Password = "changed behind its back"
	w.backend.store[as] = m
	w.backend.mu.Unlock()
	changed := w.clk.Now()
	w.log.take()

	w.pass(time.Minute) // a verify pass, whose checks do not all log in
	for w.clk.Now().Sub(changed) <= every && !slices.Contains(w.log.audit(), as+": repaired (password)") {
		w.pass(w.h.UntilNext())
	}
	is.True(slices.Contains(w.log.audit(), as+": repaired (password)")) // found and repaired within the interval
	w.backend.mu.Lock()
	is.Equal(w.backend.store[as].p.Password, "pw-"+as) // the minted password is held again
	w.backend.mu.Unlock()
}

// A backend that does not check passwords by logging in (superuser mode) has every check
// granted a login, as before the budget: nothing is spread, and no check is added.
func TestEveryCheckIsGrantedALoginWhereTheBackendChecksOtherwise(t *testing.T) {
	is := is.New(t)
	w, names := loginWorld(t, 20, domain.Config{Every: 5 * time.Second, VerifyEvery: time.Minute, LoginRate: 1})
	w.backend.byLogin = false
	w.runFor(5 * time.Minute)
	w.backend.mu.Lock()
	checks, logins := len(w.backend.holdsCalls), len(w.backend.logins)
	w.backend.mu.Unlock()
	is.Equal(checks, 5*len(names)) // a check of each at every verify pass, none added
	is.Equal(logins, checks)       // every one granted a login, beyond the ceiling
}

// A pass whose only business is logins on their budget checks the backend as a whole without
// reading its record, which every verify pass still reads; a problem that check finds is said
// once and stops the pass's logins, and the first pass after it is over reads the record.
func TestPassesThatOnlyLogInReadNoRecord(t *testing.T) {
	is := is.New(t)
	every := 10 * time.Minute
	w, _ := loginWorld(t, 200, domain.Config{Every: 5 * time.Second, VerifyEvery: time.Minute, LoginCheckEvery: every, LoginRate: 2})
	w.runFor(3 * time.Minute)
	w.backend.mu.Lock()
	managed, standing, logins := w.backend.managed, w.backend.standing, len(w.backend.logins)
	w.backend.mu.Unlock()
	w.runFor(10 * time.Minute)
	w.backend.mu.Lock()
	managed, standing, logins = w.backend.managed-managed, w.backend.standing-standing, len(w.backend.logins)-logins
	w.backend.mu.Unlock()
	is.True(managed >= 10 && managed <= 11) // the record read at each verify pass, and no other
	is.True(standing >= 100)                // the passes between logged in, each after the backend as a whole was checked
	is.True(logins >= 100)

	w.backend.managedErr = errors.New("down")
	w.log.take()
	w.backend.mu.Lock()
	managed, standing, logins = w.backend.managed, w.backend.standing, len(w.backend.logins)
	w.backend.mu.Unlock()
	r := w.pass(w.h.UntilNext()) // no verify pass: only logins are due
	is.Equal(r.ServerProblem, "down")
	w.backend.mu.Lock()
	is.Equal(w.backend.standing, standing+1) // found by the check of the backend as a whole
	is.Equal(w.backend.managed, managed)     // not by a record read
	w.backend.mu.Unlock()
	for range 3 {
		r := w.pass(w.h.UntilNext())
		is.Equal(r.ServerProblem, "down")
	}
	w.backend.mu.Lock()
	is.Equal(len(w.backend.logins), logins) // nobody logged in as while it could not be used
	managed = w.backend.managed
	w.backend.mu.Unlock()
	is.Equal(w.log.take(), []string{"down; nothing is created, checked or withdrawn until this is resolved"}) // said once

	w.backend.managedErr = nil
	w.pass(w.h.UntilNext())
	is.Equal(w.log.take(), []string{"the backend can be used again (it was: down)"})
	w.backend.mu.Lock()
	is.Equal(w.backend.managed, managed+1) // the record read again once it could be
	w.backend.mu.Unlock()
}

// A withdrawal that falls due while a pass that did not read the record checks logins is made
// on the record, read first in that pass, never on the one an earlier pass read.
func TestAWithdrawalThatFallsDueDuringLoginChecksReadsTheRecordFirst(t *testing.T) {
	is := is.New(t)
	const n = 20
	w, names := loginWorld(t, n, domain.Config{Every: 5 * time.Second, VerifyEvery: time.Minute, LoginCheckEvery: 20 * time.Second,
		LoginRate: 10, WithdrawSettle: 10 * time.Second})
	w.runFor(2 * time.Minute)
	var entries []entry
	for _, as := range names[:n-1] {
		entries = append(entries, consumer(as, "/s/"+as))
	}
	w.contributions(entries...) // the last no longer listed
	w.backend.holdsFn = func(context.Context, ports.Provision) error {
		w.clk.Add(6 * time.Second) // a login check that takes its time
		return nil
	}
	for range 20 {
		w.backend.mu.Lock()
		managed, standing := w.backend.managed, w.backend.standing
		w.backend.mu.Unlock()
		w.pass(w.h.UntilNext())
		w.backend.mu.Lock()
		removed, read, stood := len(w.backend.removes) > 0, w.backend.managed-managed, w.backend.standing-standing
		w.backend.mu.Unlock()
		if removed {
			is.Equal(stood, 1) // a pass that began as one of logins only
			is.Equal(read, 1)  // read the record before it withdrew
			return
		}
		is.True(read+stood <= 1) // one look at the backend as a whole a pass
	}
	t.Fatal("never withdrawn")
}
