package domain_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

// Issue 19: bounded under pressure.

// refusal is an error as the adapter gives it for a role that is not the provider's to take.
func refusal(as string) error {
	return fmt.Errorf("create role %s: role %s exists, the provider did not make it, and it is superuser; it is not taken over: %w",
		as, as, ports.ErrRefused)
}

// passes runs a pass every d for total, and answers how many creates of as they made.
func (w *world) passes(as string, d, total time.Duration) int {
	before := w.backend.createsOf(as)
	for t := time.Duration(0); t < total; t += d {
		w.pass(d)
	}
	return w.backend.createsOf(as) - before
}

func TestARefusedConsumerBacksOff(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/a", "pw")
	w.contributions(consumer("a", "/s/a"))
	w.backend.createErr = map[string]error{"a": fmt.Errorf("create role a: no: %w", ports.ErrRefused)}
	r := w.pass(0)
	is.Equal(r.Failures, 1)
	// Tried again after 5 s, 10 s, 20 s, 40 s, 80 s, 160 s, then every 5 min: 6 more in 10 min.
	is.Equal(w.passes("a", domain.DefaultEvery, 10*time.Minute), 6)
	is.Equal(w.passes("a", domain.DefaultEvery, 10*time.Minute), 2) // at most 5 min apart
	// Said once, as a refusal with when it is tried again: never as a failure retried every pass.
	is.Equal(w.log.count("a: refused: create role a: no: refused; tried again in 5s, or at once when its entry changes or on SIGHUP"), 1)
	is.Equal(w.log.count("a: "), 1)
	is.Equal(w.h.Reconcile(ctx).Consumers["a"], domain.StateRefused) // refused while it waits
}

// Issue 39, case 2: what a consumer's entry asks for that cannot be made (a value the server
// rejects) is a refusal: said once as one, and tried again hourly, not on a back-off that puts
// an ERROR in the server's log every few minutes; at once when its entry changes.
func TestAnInvalidEntryIsRefusedAndTriedHourly(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/a", "pw")
	w.contributions(consumer("a", "/s/a"))
	rejected := fmt.Errorf(`create role a: setting statement_timeout: invalid value for parameter "statement_timeout": "soon": %w`, ports.ErrInvalid)
	w.backend.createErr = map[string]error{"a": rejected}
	w.pass(0)
	is.Equal(w.passes("a", domain.DefaultEvery, 59*time.Minute), 0) // not asked again within the hour
	is.Equal(w.passes("a", domain.DefaultEvery, 2*time.Minute), 1)  // then once
	is.Equal(w.log.take(), []string{"a: refused: " + rejected.Error() + "; tried again in 1h0m0s, or at once when its entry changes or on SIGHUP"})
	is.Equal(w.h.Reconcile(ctx).Consumers["a"], domain.StateRefused)

	delete(w.backend.createErr, "a")
	w.write("/s/a", "rotated") // its entry changed: tried at once, and made
	is.Equal(w.pass(time.Second).Consumers["a"], domain.StateApplied)
}

func TestATransientFailureIsTriedEveryPass(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/a", "pw")
	w.contributions(consumer("a", "/s/a"))
	w.backend.createErr = map[string]error{"a": fmt.Errorf("connect: the server is starting: %w", ports.ErrTransient)}
	w.pass(0)
	is.Equal(w.passes("a", domain.DefaultEvery, time.Minute), 12) // every pass
}

func TestARefusedConsumerIsTriedAtOnceWhenItChangesOrOnSIGHUP(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/a", "pw")
	w.contributions(consumer("a", "/s/a"))
	w.backend.createErr = map[string]error{"a": refusal("a")}
	for range 6 {
		w.pass(5 * time.Minute) // backed off to the full five minutes
	}
	creates := w.backend.createsOf("a")
	w.pass(time.Second)
	is.Equal(w.backend.createsOf("a"), creates) // waiting

	w.write("/s/a", "rotated")
	w.pass(time.Second)
	is.Equal(w.backend.createsOf("a"), creates+1) // its secret changed: tried at once
	w.pass(time.Second)
	is.Equal(w.backend.createsOf("a"), creates+1) // and waits again

	e := consumer("a", "/s/a")
	e["values"] = map[string]any{"name": "a2"}
	w.contributions(e)
	w.pass(time.Second)
	is.Equal(w.backend.createsOf("a"), creates+2) // its entry changed: tried at once

	w.h.RetryNow() // SIGHUP
	w.pass(time.Second)
	is.Equal(w.backend.createsOf("a"), creates+3) // tried at once
	w.pass(time.Second)
	is.Equal(w.backend.createsOf("a"), creates+3) // and backed off again

	delete(w.backend.createErr, "a") // somebody dropped the role that was in the way
	w.h.RetryNow()
	is.Equal(w.pass(time.Second).Consumers["a"], domain.StateApplied)
	is.Equal(w.log.count("a: created, after"), 1)
}

func TestOwnPasswordIsScrubbedFirstThenTheLongestInAFixedOrder(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/a", "my-secret-pw")
	w.write("/s/b", "secret")
	w.write("/s/c", "zzzzzz")
	w.contributions(consumer("a", "/s/a"), consumer("b", "/s/b"), consumer("c", "/s/c"))
	w.backend.createErr = map[string]error{
		"a": errors.New("ALTER ROLE a PASSWORD 'my-secret-pw'"),
		"c": errors.New("c saw 'my-secret-pw' and 'secret'"),
	}
	w.pass(0)
	is.Equal(w.log.take(), []string{
		"a: create failed, will retry: ALTER ROLE a PASSWORD '***'", // its own first: nothing of it left
		"c: create failed, will retry: c saw '***' and '***'",       // the others longest first
	})
	for range 300 {
		w.h.RetryNow()
		w.pass(time.Second)
	}
	is.Equal(w.log.count("a: create failed"), 1) // the same text on every pass: said again only the 240th time
}

func TestASecretRefusedAgainAfterAUsableOneIsSaidAgain(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/a", "p\x00w")
	w.contributions(consumer("a", "/s/a"))
	w.pass(0)
	w.write("/s/a", "pw")
	w.pass(time.Second)
	w.write("/s/a", "p\x00w")
	w.pass(time.Second)
	is.Equal(w.log.count("a: secret refused"), 2) // said each time it comes back
}

func TestAFileThatComesBackSaysSoFirst(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/a", "pw")
	w.pass(0) // no file yet
	w.log.take()
	w.contributions(consumer("a", "/s/a"), consumer("a", "/s/a"))
	w.pass(time.Second)
	lines := w.log.take()
	is.Equal(lines[0], "contributions file readable again")                               // first, as in the spec
	is.Equal(lines[1], "a: listed more than once in "+receives+"; using the first entry") // then what it says
}

func TestCouldNotCheckIsSaidAsAFailingCreateIs(t *testing.T) {
	is := is.New(t)
	w := newApplied(t)
	w.backend.holdsErr = errors.New("canceling statement due to statement timeout (SQLSTATE 57014)")
	for range 250 {
		w.pass(time.Minute)
	}
	is.Equal(w.log.count("letta: could not check the backend, will ask again"), 2) // the first, and the 240th
	w.backend.holdsErr = errors.New("another")
	w.pass(time.Minute)
	is.Equal(w.log.count("letta: could not check the backend, will ask again: another"), 1) // a change is said
}

func TestACauseManyShareIsOneLine(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	var entries []entry
	for i := range 5 {
		as := fmt.Sprint("c", i)
		w.write("/s/"+as, "pw"+as)
		entries = append(entries, consumer(as, "/s/"+as))
	}
	w.contributions(entries...)
	w.pass(0)
	w.log.take()
	w.backend.holdsFn = func(_ context.Context, p ports.Provision) error {
		return fmt.Errorf("check %s: %w", p.As, errors.New("FATAL: sorry, too many clients already (SQLSTATE 53300)"))
	}
	r := w.pass(time.Minute)
	is.Equal(w.log.take(), []string{"could not check the backend for 5 consumers (c0, c1, c2, ...), will ask again: " +
		"FATAL: sorry, too many clients already (SQLSTATE 53300)"}) // one line for all
	is.Equal(r.Unchecked, 5)
	is.Equal(r.CheckErrors, 5)
	is.Equal(r.Status[4].LastError, "check c4: FATAL: sorry, too many clients already (SQLSTATE 53300)") // each keeps its own error
	w.pass(time.Minute)
	is.Equal(len(w.log.take()), 0) // and not said again while it lasts
}

func TestNoCheckIsCountedWhileTheServerIsDown(t *testing.T) {
	is := is.New(t)
	w := newApplied(t)
	w.backend.managedErr = errors.New("the server cannot be reached")
	r := w.pass(time.Minute)
	is.Equal(r.Unchecked, 1)   // unchecked
	is.Equal(r.CheckErrors, 0) // but no check was made
	is.Equal(len(w.backend.holdsCalls), 0)
}

// TestEveryConsumerIsCheckedWithinTwoIntervals: a backend that times out on the 48th check of
// every batch (issue 19: the slots' cliff) still has every one of 120 consumers checked well
// within two verify intervals, by the passes that continue where the last stopped.
func TestEveryConsumerIsCheckedWithinTwoIntervals(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	var entries []entry
	for i := range 120 {
		as := fmt.Sprintf("c%03d", i)
		w.write("/s/"+as, "pw")
		entries = append(entries, consumer(as, "/s/"+as))
	}
	w.contributions(entries...)
	w.configure(domain.Config{HoldsTimeout: time.Second})
	w.pass(0)
	batch := w.backend.batches
	n := 0
	w.backend.holdsFn = func(ctx context.Context, _ ports.Provision) error {
		if w.backend.batches != batch {
			batch, n = w.backend.batches, 0
		}
		if n++; n == 48 {
			w.clk.Add(time.Second) // the 48th hangs until its deadline
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	start := w.clk.Now()
	var r domain.Report
	for w.clk.Now().Sub(start) < 2*domain.DefaultVerifyEvery {
		r = w.pass(domain.DefaultEvery)
	}
	for _, st := range r.Status {
		if st.CheckedAt.IsZero() {
			t.Logf("%s %v", st.As, st.State)
		}
		is.True(!st.CheckedAt.IsZero()) // checked
	}
	is.True(w.log.count("could not check") > 0) // and the timeouts were said
}

func TestAStopLeavesWhatWasNotStartedUnsaid(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	var entries []entry
	for i := range 100 {
		as := fmt.Sprintf("c%03d", i)
		w.write("/s/"+as, "pw")
		entries = append(entries, consumer(as, "/s/"+as))
	}
	w.contributions(entries...)
	cctx, stop := context.WithCancel(ctx)
	n := 0
	w.backend.createFn = func(ctx context.Context, _ ports.Provision) {
		if n++; n == 10 {
			stop()
		}
	}
	r := w.h.Reconcile(cctx)
	is.Equal(len(w.backend.creates), 10) // none started after the stop
	is.Equal(r.Created, 10)
	is.Equal(r.Failures, 0)                              // and the others are not failures
	is.Equal(r.Consumers["c050"], domain.StateUnchecked) // but left as they were
	is.True(!strings.Contains(strings.Join(w.log.lines(), "\n"), "c050"))
}

func TestASharedCauseHoldingAPasswordIsSaidOnce(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/a", "hunter2")
	w.write("/s/b", "pw-b")
	w.contributions(consumer("a", "/s/a"), consumer("b", "/s/b"))
	w.pass(0)
	w.log.take()
	w.backend.holdsFn = func(_ context.Context, p ports.Provision) error {
		return fmt.Errorf("check %s: %w", p.As, errors.New("server quoted hunter2"))
	}
	for range 5 {
		w.pass(time.Minute)
	}
	is.Equal(w.log.take(), []string{"could not check the backend for 2 consumers (a, b), will ask again: server quoted ***"}) // scrubbed, and said once
}

// Issue 28, case 4: a consumer lost from the backend whose create is then refused (its role
// renamed away) waits as a refused create does, said once, rather than being found lost and
// applied again at every verify pass.
func TestALostConsumerWhoseCreateIsRefusedBacksOff(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/a", "pw")
	w.contributions(consumer("a", "/s/a"))
	w.pass(0)
	is.Equal(w.backend.createsOf("a"), 1) // made
	w.log.take()

	w.backend.lose("a") // an operator renamed its role
	renamed := fmt.Errorf("create role a: a is now the role a_parked (renamed); it is not made again beside it: %w", ports.ErrRefused)
	w.backend.createErr = map[string]error{"a": renamed}
	// 30 min of passes: found lost at the first verify pass, then tried as a refused create is,
	// 5 s, 10 s, ... at most 5 min apart, never checked and applied again.
	creates := w.passes("a", domain.DefaultEvery, 30*time.Minute)
	is.True(creates >= 6 && creates <= 13) // backed off: 10 over the half hour, not one per verify pass
	is.Equal(w.log.take(), []string{
		"a: the backend no longer holds it; applying again",
		"a: what drifted: missing",
		"a: refused: " + renamed.Error() + "; tried again in 5s, or at once when its entry changes or on SIGHUP",
	}) // said once
	is.Equal(w.h.Reconcile(ctx).Consumers["a"], domain.StateRefused)

	w.h.RetryNow() // SIGHUP
	before := w.backend.createsOf("a")
	w.pass(time.Second)
	is.Equal(w.backend.createsOf("a"), before+1) // tried at once
	w.pass(time.Second)
	is.Equal(w.backend.createsOf("a"), before+1) // and waits again

	delete(w.backend.createErr, "a") // renamed back, or the record taken off the parked role
	w.h.RetryNow()
	is.Equal(w.pass(time.Second).Consumers["a"], domain.StateApplied)
	is.Equal(w.log.count("a: created, after"), 1)
}

// Issue 28, case 7c: two new consumers asking for one database in one pass, created at once:
// the earlier in the file has it, whatever order the creates would finish in, and the later is
// refused before any call, said once, backing off; one listed later is refused the same way.
func TestTwoNewConsumersAskingForOneDatabaseTheEarlierInTheFileHasIt(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.configure(domain.Config{Parallel: 8})
	sharing := func(as string) entry {
		e := consumer(as, "/s/"+as)
		e["values"] = map[string]any{"name": "shared"}
		w.write("/s/"+as, "pw-"+as)
		return e
	}
	w.contributions(sharing("z"), sharing("a"), sharing("m"))
	r := w.pass(0)
	is.Equal(r.Consumers["z"], domain.StateApplied) // the first in the file has it
	is.Equal(w.backend.createsOf("a"), 0)           // the others refused before any call
	is.Equal(w.backend.createsOf("m"), 0)
	w.contributions(sharing("z"), sharing("a"), sharing("m"), sharing("b"))
	w.passes("b", domain.DefaultEvery, 10*time.Minute)
	for _, as := range []string{"a", "m", "b"} {
		is.Equal(w.log.count(as+": refused: create database shared: consumer z has it"), 1) // said once, naming z
		is.Equal(w.log.count(as+": "), 1)                                                   // and nothing else of it
		is.Equal(w.h.Reconcile(ctx).Consumers[as], domain.StateRefused)
	}
	is.True(w.backend.createsOf("b") <= 8) // backed off as a refused create
}

// A cause many consumers share is said once while it lasts: the passes between verify rounds
// check nothing, and forget nothing (the spec's loop, --every 5s --verify-every 1m, said it at
// every round).
func TestASharedCauseIsSaidOnceWhatever(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/a", "pw-a")
	w.write("/s/b", "pw-b")
	w.contributions(consumer("a", "/s/a"), consumer("b", "/s/b"))
	w.configure(domain.Config{Every: 5 * time.Second, VerifyEvery: time.Minute})
	w.pass(0)
	w.log.take()
	w.backend.holdsErr = errors.New("FATAL: sorry, too many clients already (SQLSTATE 53300)")
	for range 10 * 12 { // ten minutes of passes, ten verify rounds
		w.pass(5 * time.Second)
	}
	is.Equal(w.log.take(), []string{"could not check the backend for 2 consumers (a, b), will ask again: " +
		"FATAL: sorry, too many clients already (SQLSTATE 53300)"}) // said once in ten rounds
	w.backend.holdsErr = nil
	w.pass(time.Minute) // over: a round checks both, and they are held
	w.backend.holdsErr = errors.New("FATAL: sorry, too many clients already (SQLSTATE 53300)")
	w.pass(time.Minute)
	is.Equal(w.log.count("could not check the backend for 2 consumers"), 1) // back: said again
}

// Connections to many databases refused for one cause: each error names its database, and
// the backend says their shared cause (ports.SharedError); one line says it for all.
func TestACauseIsMatchedByWhatTheBackendSaysNotByItsText(t *testing.T) {
	is := is.New(t)
	w, _ := applied(t, 50)
	w.log.take()
	cause := "127.0.0.1:5432 (localhost): ValidateConnect failed: read only connection"
	w.backend.holdsFn = func(_ context.Context, p ports.Provision) error {
		return &ports.SharedError{Err: fmt.Errorf("check extensions in %s: failed to connect to `user=provider database=%s`: %s",
			p.As, p.As, cause), Cause: cause}
	}
	var r domain.Report
	for range 5 {
		r = w.pass(time.Minute)
		is.Equal(r.CheckErrors, 50)
	}
	is.Equal(w.log.take(), []string{"could not check the backend for 50 consumers (c0, c1, c2, ...), will ask again: " + cause}) // one line
	is.True(strings.Contains(r.Status[7].LastError, "database=c7"))                                                              // each keeps its own error
}
