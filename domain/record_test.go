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

// twoApplied is a world in which a and b, listed with their secrets, were applied by a first
// pass.
func twoApplied(t *testing.T) *world {
	t.Helper()
	w := newWorld(t)
	w.write("/s/a", "pw-a")
	w.write("/s/b", "pw-b")
	w.contributions(consumer("a", "/s/a"), consumer("b", "/s/b"))
	w.pass(0)
	is.New(t).Equal(len(w.backend.creates), 2) // both created
	return w
}

// tenApplied is a world in which c0 to c9, listed, were applied by a first pass.
func tenApplied(t *testing.T) (*world, []entry) {
	t.Helper()
	return applied(t, 10)
}

// applied is a world in which c0 to c(n-1), listed, were applied by a first pass.
func applied(t *testing.T, n int) (*world, []entry) {
	t.Helper()
	w := newWorld(t)
	var all []entry
	for i := range n {
		as := fmt.Sprintf("c%d", i)
		w.write("/s/"+as, "pw")
		all = append(all, consumer(as, "/s/"+as))
	}
	w.contributions(all...)
	w.pass(0)
	return w, all
}

func TestARestartWithdrawsWhatTheRecordNamesAndTheFileNoLongerLists(t *testing.T) {
	for _, c := range []struct {
		policy domain.Policy
		gone   func(b *fakeBackend) []string
	}{
		{domain.Retain, func(b *fakeBackend) []string { return b.removes }},
		{domain.Drop, func(b *fakeBackend) []string { return b.drops }},
	} {
		t.Run(string(c.policy), func(t *testing.T) {
			is := is.New(t)
			w := twoApplied(t)
			// The daemon stops; b leaves the file; the daemon starts with no memory of b.
			w.contributions(consumer("a", "/s/a"))
			w.configure(domain.Config{OnWithdraw: c.policy})
			w.pass(0)
			is.Equal(len(c.gone(w.backend)), 0) // not before the file settled
			w.log.take()
			w.pass(settle)
			is.Equal(c.gone(w.backend), []string{"b"}) // withdrawn, though this process never applied it
			is.Equal(w.log.take(), []string{"b: no longer in " + receives + "; withdrawing it from the backend"})
			is.Equal(w.backend.createsOf("a"), 1) // and a was not created again
		})
	}
}

func TestARestartChecksBeforeItCreates(t *testing.T) {
	is := is.New(t)
	w := twoApplied(t)
	w.configure(domain.Config{})
	r := w.pass(0)
	is.Equal(len(w.backend.creates), 2)                // nothing created again
	is.Equal(w.backend.holdsCalls, []string{"a", "b"}) // each checked
	is.Equal(w.backend.batches, 1)                     // in one batch
	is.Equal(r.Consumers, map[string]domain.State{"a": domain.StateApplied, "b": domain.StateApplied})
	is.Equal(len(w.log.lines()), 0) // nothing to say

	w.backend.lose("b") // lost while the daemon was down
	w.configure(domain.Config{})
	r = w.pass(0)
	is.Equal(w.backend.createsOf("b"), 2) // created, as any consumer it does not hold
	is.Equal(w.backend.createsOf("a"), 1)
	is.Equal(r.Created, 1)
	is.Equal(len(w.log.lines()), 0) // a create, not a repair: said like the seed's start
}

func TestNothingIsWithdrawnWhileTheRecordCannotBeRead(t *testing.T) {
	is := is.New(t)
	w := twoApplied(t)
	w.contributions(consumer("a", "/s/a"))
	w.configure(domain.Config{})
	w.backend.managedErr = errors.New("the server postgres@127.0.0.1:5432 cannot be reached: connection refused")
	w.log.take()
	for range 5 {
		r := w.pass(settle)
		is.Equal(r.ServerProblem, "the server postgres@127.0.0.1:5432 cannot be reached: connection refused")
		is.Equal(r.Consumers["a"], domain.StateUnchecked) // not failed: nobody asked
		is.True(!r.Converged())
	}
	is.Equal(len(w.backend.removes), 0)    // nothing withdrawn
	is.Equal(len(w.backend.holdsCalls), 0) // nor anyone checked
	is.Equal(len(w.backend.creates), 2)    // nor created
	is.Equal(w.log.take(), []string{"the server postgres@127.0.0.1:5432 cannot be reached: connection refused; " +
		"nothing is created, checked or withdrawn until this is resolved"}) // said once

	w.backend.managedErr = nil
	w.pass(settle)
	is.Equal(w.backend.removes, []string{"b"}) // withdrawn once the record could be read
	is.Equal(w.log.take(), []string{
		"the backend can be used again (it was: the server postgres@127.0.0.1:5432 cannot be reached: connection refused)",
		"b: no longer in " + receives + "; withdrawing it from the backend",
	})
}

func TestAServerProblemIsSaidAgainWhenItChangesAndEvery240thPass(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/a", "pw")
	w.contributions(consumer("a", "/s/a"))
	w.backend.managedErr = errors.New("down")
	said := 0
	for n := 1; n <= 480; n++ {
		w.pass(time.Second)
		for range w.log.take() {
			is.True(n == 1 || n == 240 || n == 480) // first, then every 240th
			said++
		}
	}
	is.Equal(said, 3)
	w.backend.managedErr = errors.New("refused the provider's password")
	w.pass(time.Second)
	is.Equal(w.log.take(), []string{"refused the provider's password; nothing is created, checked or withdrawn until this is resolved"})
}

func TestOnceSaysNoRetry(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.configure(domain.Config{Once: true})
	w.write("/s/a", "pw")
	w.contributions(consumer("a", "/s/a"))
	w.backend.managedErr = errors.New("down")
	w.pass(0)
	is.Equal(w.log.take(), []string{"down; nothing was created, checked or withdrawn"})
	w.backend.managedErr = nil
	w.backend.createErr = map[string]error{"a": errors.New("no")}
	w.configure(domain.Config{Once: true})
	w.pass(0)
	is.Equal(w.log.take(), []string{"a: create failed: no"})
	w.backend.holdsErr = errors.New("no")
	delete(w.backend.createErr, "a")
	w.pass(0)
	w.log.take()
	w.configure(domain.Config{Once: true})
	w.pass(0)
	is.Equal(w.log.take(), []string{"a: could not check the backend: no"})
}

func TestAdoptionAndRefusalAreTheBackendsSay(t *testing.T) {
	// A role the backend will not take over fails that consumer's create, with the backend's
	// words, and the others go on.
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/a", "pw")
	w.write("/s/b", "pw")
	w.contributions(consumer("a", "/s/a"), consumer("b", "/s/b"))
	w.backend.createErr = map[string]error{"a": errors.New("create role a: role a exists, the provider did not make it, and it is a superuser; it is not taken over")}
	r := w.pass(0)
	is.Equal(r.Consumers, map[string]domain.State{"a": domain.StateFailing, "b": domain.StateApplied})
	is.Equal(w.log.take(), []string{"a: create failed, will retry: create role a: role a exists, the provider did not make it, and it is a superuser; it is not taken over"})
}

func TestARemoveThatKeepsFailingIsSaidFirstThenEvery240th(t *testing.T) {
	is := is.New(t)
	w := newApplied(t)
	w.contributions()
	w.pass(0)
	w.backend.removeErr = errors.New("locked")
	w.log.take()
	said := map[int][]string{}
	for n := 1; n <= 480; n++ {
		r := w.pass(settle)
		is.Equal(r.Failures, 1)
		if lines := w.log.take(); len(lines) > 0 {
			said[n] = lines
		}
	}
	is.Equal(said, map[int][]string{
		1:   {"letta: no longer in " + receives + "; withdrawing it from the backend", "letta: remove failed, will retry: locked"},
		240: {"letta: remove failed, will retry: locked"},
		480: {"letta: remove failed, will retry: locked"},
	})
	is.Equal(len(w.backend.removes), 480) // tried every pass
}

func TestABadEntryAppliesTheOthersAndWithdrawsNothing(t *testing.T) {
	is := is.New(t)
	w := twoApplied(t)
	w.write("/s/c", "pw-c")
	bad := consumer("b", "/s/b")
	bad["values"] = "x"
	seven := consumer("seven", "/s/seven")
	seven["as"] = 7
	w.contributions(consumer("a", "/s/a"), bad, consumer("c", "/s/c"), seven)
	w.log.take()
	for range 3 {
		r := w.pass(settle)
		is.Equal(r.BadEntries, 2)
		is.Equal(r.Consumers["c"], domain.StateApplied) // the good ones provisioned
	}
	is.Equal(w.backend.createsOf("c"), 1)
	is.Equal(len(w.backend.removes), 0) // b is not withdrawn: its entry could not be read
	is.Equal(w.log.take(), []string{
		receives + ": given[1] (b) cannot be read: values is a string, not an object; the other entries are applied, " +
			"and nothing is withdrawn while the file has an entry that cannot be read",
		receives + ": given[3] cannot be read: as is a number, not a string; the other entries are applied, " +
			"and nothing is withdrawn while the file has an entry that cannot be read",
	}) // each said once, naming the entry
	w.contributions(consumer("a", "/s/a"), consumer("c", "/s/c"))
	w.pass(0)
	w.pass(settle)
	is.Equal(w.backend.removes, []string{"b"}) // once the file is whole, b goes
}

func TestAnUnchangedFileIsNotParsedAgain(t *testing.T) {
	is := is.New(t)
	w := newApplied(t)
	for range 10 {
		w.pass(time.Second)
	}
	is.Equal(w.h.Parses(), 1) // parsed once
	w.contributions(consumer("letta", "/s/letta"), consumer("other", "/s/other"))
	w.pass(time.Second)
	w.pass(time.Second)
	is.Equal(w.h.Parses(), 2) // and again once changed
}

func TestAWithdrawalWaitsForTheFileToSettle(t *testing.T) {
	is := is.New(t)
	w := twoApplied(t)
	for i := range 6 { // a writer rewriting in place: no state it leaves lasts the settle time
		if i%2 == 0 {
			w.contributions(consumer("a", "/s/a"))
		} else {
			w.contributions(consumer("a", "/s/a"), consumer("b", "/s/b"))
		}
		w.pass(settle - time.Second)
	}
	w.contributions(consumer("a", "/s/a")) // the writer's last state
	r := w.pass(settle - time.Second)
	is.Equal(r.WithdrawalsHeld, 1) // held: the file has not settled
	r = w.pass(settle - time.Second)
	is.Equal(r.WithdrawalsHeld, 1)
	is.Equal(len(w.backend.removes), 0)
	w.pass(time.Second)
	is.Equal(w.backend.removes, []string{"b"}) // settled: withdrawn
}

func TestAMassWithdrawalIsSaidLoudlyAndWaitsSixTimesAsLong(t *testing.T) {
	is := is.New(t)
	w, all := tenApplied(t)
	w.contributions(all[:4]...) // six of ten gone: more than half, more than three
	w.log.take()
	r := w.pass(0)
	is.True(r.MassWithdrawal)
	is.Equal(r.WithdrawalsHeld, 6)
	for range 5 {
		r = w.pass(settle)
		is.True(r.MassWithdrawal) // held through five settle periods
	}
	is.Equal(len(w.backend.removes), 0)
	is.Equal(w.log.take(), []string{"WITHDRAWAL HELD: " + receives + " no longer lists 6 of the 10 consumers the provider " +
		"manages; they are withdrawn only once the file has stayed unchanged for 1m0s. If that is not meant, put the file right now"}) // said once
	r = w.pass(settle)
	is.Equal(len(w.backend.removes), 6) // then done
	is.True(!r.MassWithdrawal)
	is.Equal(r.Withdrawn, 6)
}

func TestDropWaitsForDropAfterAndAConsumerBackInTimeKeepsItsData(t *testing.T) {
	is := is.New(t)
	w := twoApplied(t)
	w.configure(domain.Config{OnWithdraw: domain.Drop, DropAfter: time.Hour})
	w.pass(0)
	w.contributions() // both leave
	w.pass(0)
	w.pass(settle)
	is.Equal(w.backend.removes, []string{"a", "b"}) // first only withdrawn: the login goes
	is.Equal(len(w.backend.drops), 0)               // the data stays

	w.contributions(consumer("a", "/s/a")) // a comes back within the hour
	w.pass(30 * time.Minute)
	is.Equal(w.backend.createsOf("a"), 2) // revived
	w.log.take()
	w.pass(31 * time.Minute)
	is.Equal(w.backend.drops, []string{"b"}) // b dropped once withdrawn for an hour; a never
	is.Equal(w.log.take(), []string{"b: withdrawn 1h1m0s ago; dropping it from the backend"})

	w.configure(domain.Config{OnWithdraw: domain.Drop, DropAfter: time.Hour}) // a restart keeps the clock of the record
	w.contributions()
	w.pass(0)
	w.pass(settle)
	is.Equal(w.backend.removes, []string{"a", "b", "a"})
	w.pass(30 * time.Minute)
	is.Equal(w.backend.drops, []string{"b"}) // not yet
	w.configure(domain.Config{OnWithdraw: domain.Drop, DropAfter: time.Hour})
	w.pass(30*time.Minute - settle) // the restarted loop first sees a withdrawn here
	is.Equal(w.backend.drops, []string{"b"})
	w.pass(settle)
	is.Equal(w.backend.drops, []string{"b"}) // an hour after the record's time: a record's time never shortens the wait
	w.pass(time.Hour - settle - time.Second)
	is.Equal(w.backend.drops, []string{"b"})
	w.pass(time.Second)
	is.Equal(w.backend.drops, []string{"b", "a"}) // an hour after this process first saw it withdrawn
}

// A record is not trusted to shorten the drop's delay: a role allowed to write it (CREATEROLE)
// could date a withdrawal back to 2000 and have its database dropped at once.
func TestAWithdrawalDatedBackIsDroppedOnlyAfterDropAfterFromWhenItWasSeen(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.configure(domain.Config{OnWithdraw: domain.Drop, DropAfter: time.Hour})
	w.write("/s/a", "pw")
	w.contributions(consumer("a", "/s/a"))
	w.backend.store = map[string]made{"forged": {p: ports.Provision{As: "forged"}, withdrawn: true,
		since: w.clk.Now().Add(-26 * 365 * 24 * time.Hour)}} // dated 26 years back
	w.pass(0)
	w.pass(settle)
	is.Equal(len(w.backend.drops), 0) // not at once
	w.pass(time.Hour - settle - time.Second)
	is.Equal(len(w.backend.drops), 0) // nor a second before the hour is up
	w.pass(time.Second)
	is.Equal(w.backend.drops, []string{"forged"}) // an hour after it was first seen withdrawn
}

func TestDropAfterZeroDropsAtOnce(t *testing.T) {
	is := is.New(t)
	w := twoApplied(t)
	w.configure(domain.Config{OnWithdraw: domain.Drop})
	w.contributions(consumer("a", "/s/a"))
	w.pass(0)
	r := w.pass(settle)
	is.Equal(w.backend.drops, []string{"b"})
	is.Equal(len(w.backend.removes), 0)
	is.Equal(r.Withdrawn, 1)
	is.Equal(r.Dropped, 1)
}

// lease is a Lease a test hands out and takes back.
type lease struct{ held bool }

func (l *lease) Held(context.Context) error {
	if l.held {
		return nil
	}
	return fmt.Errorf("replica b: %w", ports.ErrStandby)
}

func TestAStandbyActsNotAndATakeOverReadsTheRecordAgain(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	l := &lease{}
	w.lease = l
	w.configure(domain.Config{})
	w.write("/s/a", "pw")
	w.contributions(consumer("a", "/s/a"))
	r := w.pass(time.Minute)
	is.True(r.Standby)
	is.True(!r.Converged())
	is.Equal(w.backend.managed+len(w.backend.creates), 0) // a standby asks nothing of the backend

	l.held = true
	w.pass(time.Minute)
	is.Equal(w.backend.createsOf("a"), 1) // the leader acts
	l.held = false
	w.pass(time.Minute)
	w.backend.lose("a") // the other replica's doing, say
	calls := w.backend.managed
	l.held = true
	w.pass(0)
	is.Equal(w.backend.managed, calls+1)  // taken again: the record read afresh
	is.Equal(w.backend.createsOf("a"), 2) // and what it no longer holds made, without waiting for a verify interval
}

func TestALeaderThatLostTheLeaseWithdrawsNothing(t *testing.T) {
	is := is.New(t)
	w := twoApplied(t)
	l := &lease{held: true}
	w.lease = l
	w.configure(domain.Config{})
	w.pass(0)
	w.contributions(consumer("a", "/s/a"))
	w.pass(0)
	calls := 0
	w.backend.holdsFn = func(context.Context, ports.Provision) error { calls++; l.held = false; return nil } // lost mid-pass
	r := w.pass(time.Minute)
	is.Equal(calls, 1)
	is.True(r.Standby)
	is.Equal(len(w.backend.removes), 0) // asked again before withdrawing: nothing withdrawn
}

// askless is a Lease that cannot be asked for.
type askless struct{ err error }

func (l askless) Held(context.Context) error { return l.err }

func TestALeaseThatCannotBeAskedForIsTheServersProblem(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	l := &askless{err: errors.New("the server postgres@127.0.0.1:1 cannot be reached: connection refused")}
	w.lease = l
	w.configure(domain.Config{})
	w.write("/s/a", "pw")
	w.contributions(consumer("a", "/s/a"))
	for range 3 {
		r := w.pass(time.Second)
		is.True(!r.Standby)
		is.Equal(r.ServerProblem, l.err.Error())
	}
	is.Equal(w.log.take(), []string{l.err.Error() + "; nothing is created, checked or withdrawn until this is resolved"}) // said once
	l.err = nil
	w.pass(time.Second)
	is.Equal(w.log.take()[0], "the backend can be used again (it was: "+"the server postgres@127.0.0.1:1 cannot be reached: connection refused)")
	is.Equal(w.backend.createsOf("a"), 1)
}

// A restart on a file unchanged for an hour: its mtime says it settled long ago, and a few
// leavers go at once; but a mass withdrawal on a daemon's first look at a file (the wrong path,
// an old copy) is held its full time from the start. Under Once, with no later pass, the
// mtime stands.
func TestARestartOnAStaleFileHoldsAMassWithdrawalFromTheStart(t *testing.T) {
	for _, once := range []bool{false, true} {
		t.Run(fmt.Sprint("once=", once), func(t *testing.T) {
			is := is.New(t)
			w, all := tenApplied(t)
			hour := w.clk.Now().Add(-time.Hour)
			stale := func(entries ...entry) {
				w.contributions(entries...)
				is.NoErr(w.fs.Chtimes(receives, hour, hour)) // written an hour ago, while the daemon was stopped
				w.configure(domain.Config{Once: once})
			}

			stale(all[1:]...) // one leaver
			w.pass(0)
			is.Equal(w.backend.removes, []string{"c0"}) // at once: the file settled an hour ago

			stale(all[1:3]...) // seven of the nine managed leave: a mass withdrawal
			r := w.pass(0)
			if once {
				is.Equal(len(w.backend.removes), 8) // no later pass to wait for
				return
			}
			is.True(r.MassWithdrawal)
			is.Equal(len(w.backend.removes), 1) // held, though the mtime is an hour old
			w.pass(5 * settle)
			is.Equal(len(w.backend.removes), 1) // still held after 50 s
			w.pass(settle)
			is.Equal(len(w.backend.removes), 8) // a minute after the start: done
		})
	}
}

// The brake counts against the most consumers managed within the last hour, not the last step:
// a file cut down in steps, each just under half of what was left, is a mass withdrawal once
// more than half of the most are gone.
func TestAMassWithdrawalInStepsIsStillHeld(t *testing.T) {
	is := is.New(t)
	w, all := applied(t, 60)
	w.contributions(all[:31]...) // 29 of 60 leave: not more than half
	w.pass(0)
	r := w.pass(settle)
	is.True(!r.MassWithdrawal)
	is.Equal(r.Withdrawn, 29) // withdrawn after the settle
	w.log.take()

	w.contributions(all[:16]...) // 15 of the 31 left: 44 of the 60 of this hour
	r = w.pass(time.Minute)
	is.True(r.MassWithdrawal)
	is.Equal(w.log.take(), []string{"WITHDRAWAL HELD: " + receives + " no longer lists 15 of the 31 consumers the provider manages " +
		"(with those withdrawn before, 44 of the 60 it managed within the last hour); they are withdrawn only once the file has " +
		"stayed unchanged for 1m0s. If that is not meant, put the file right now"})
	for range 5 {
		r = w.pass(settle)
		is.True(r.MassWithdrawal) // held through five settle periods
	}
	is.Equal(len(w.backend.removes), 29)
	r = w.pass(settle)
	is.Equal(r.Withdrawn, 15) // then done: the operator let it stand
	is.True(!r.MassWithdrawal)

	w.contributions(all[:10]...) // 6 of the 16 left, after the held withdrawal was let stand: a new baseline
	w.pass(0)
	r = w.pass(settle)
	is.True(!r.MassWithdrawal)
	is.Equal(r.Withdrawn, 6)
}

func TestTheBaselineIsTheMostOfTheLastHour(t *testing.T) {
	is := is.New(t)
	w, all := applied(t, 10)
	w.contributions(all[:6]...) // 4 of 10
	w.pass(0)
	is.Equal(w.pass(settle).Withdrawn, 4)
	w.pass(time.Hour)           // the 10 of an hour ago no longer count
	w.contributions(all[:3]...) // 3 of 6
	w.pass(0)
	r := w.pass(settle)
	is.True(!r.MassWithdrawal)
	is.Equal(r.Withdrawn, 3)
}

// What --once prints and what it does agree: it never withdraws what it says is held, and says
// nothing of a hold it does not apply.
func TestOnceSaysAHoldOnlyWhereItHolds(t *testing.T) {
	t.Run("a mass withdrawal from a file that just changed is held, and the pass has not converged", func(t *testing.T) {
		is := is.New(t)
		w, _ := tenApplied(t)
		w.configure(domain.Config{Once: true})
		w.contributions()
		w.log.take()
		r := w.pass(0)
		is.Equal(len(w.backend.removes), 0) // nothing withdrawn
		is.True(r.MassWithdrawal)
		is.True(!r.Converged()) // exit 1
		is.Equal(w.log.take()[0], "WITHDRAWAL HELD: "+receives+" no longer lists 10 of the 10 consumers the provider manages; "+
			"they are withdrawn only once the file has stayed unchanged for 1m0s. If that is not meant, put the file right now")
	})
	t.Run("from a file unchanged for five minutes it is done, and no hold is said", func(t *testing.T) {
		is := is.New(t)
		w, _ := tenApplied(t)
		w.contributions()
		old := w.clk.Now().Add(-5 * time.Minute)
		is.NoErr(w.fs.Chtimes(receives, old, old))
		w.configure(domain.Config{Once: true})
		w.log.take()
		r := w.pass(0)
		is.Equal(len(w.backend.removes), 10)
		is.True(r.Converged())
		for _, line := range w.log.take() {
			is.True(!strings.Contains(line, "HELD")) // nothing said of a hold
		}
	})
}

// A replica that takes the lease forgets what it knew and reads the record again: what the file
// lists is still listed in that same pass, and nothing of it is withdrawn.
func TestATakeOverWithdrawsNothingTheFileLists(t *testing.T) {
	is := is.New(t)
	w := twoApplied(t) // a and b made, and recorded
	l := &lease{}
	w.lease = l
	w.configure(domain.Config{})
	w.contributions(consumer("a", "/s/a")) // b leaves
	for range 3 {
		w.pass(settle) // on standby while the file settles
	}
	l.held = true
	r := w.pass(settle)                        // taken: the file has long settled
	is.Equal(w.backend.removes, []string{"b"}) // b withdrawn, and b alone
	is.Equal(r.Withdrawn, 1)
	is.Equal(r.Consumers["a"], domain.StateApplied)
}

// The baseline of the mass-withdrawal brake outlives the process: a loop that starts, or takes
// the lease, rebuilds it from the record (each withdrawal's time), so that a file cut down in
// steps is held as in one process, and said the same way, whether the process was restarted
// between the steps, another replica took over, or the file changed while no daemon ran.
func TestTheBaselineOutlivesTheProcess(t *testing.T) {
	held := "WITHDRAWAL HELD: " + receives + " no longer lists 15 of the 31 consumers the provider manages " +
		"(with those withdrawn before, 44 of the 60 it managed within the last hour); they are withdrawn only once the file has " +
		"stayed unchanged for 1m0s. If that is not meant, put the file right now"
	for _, between := range []string{"restart", "take-over", "changed while down"} {
		t.Run(between, func(t *testing.T) {
			is := is.New(t)
			w, all := applied(t, 60)
			w.contributions(all[:31]...) // 29 of 60 leave: not more than half
			w.pass(0)
			is.Equal(w.pass(settle).Withdrawn, 29)
			w.pass(5 * time.Minute)
			w.log.take()

			switch between {
			case "restart":
				w.configure(domain.Config{}) // a new process over the same backend
				w.pass(time.Minute)
				w.contributions(all[:16]...)
			case "take-over":
				l := &lease{}
				w.lease = l
				w.configure(domain.Config{}) // the other replica, standing by
				w.pass(time.Minute)
				w.contributions(all[:16]...)
				w.pass(time.Second)
				l.held = true // the leader died: this one takes over
			case "changed while down":
				w.clk.Add(time.Minute)
				w.contributions(all[:16]...)
				w.configure(domain.Config{})
			}
			r := w.pass(time.Second)
			is.True(r.MassWithdrawal)              // 15 of the 31 left: 44 of the 60 of this hour
			is.Equal(w.log.take(), []string{held}) // said as in one process
			is.Equal(len(w.backend.removes), 29)   // held
			w.pass(settle)
			is.Equal(len(w.backend.removes), 29) // still held after the plain settle
			for range 5 {
				w.pass(settle)
			}
			is.Equal(len(w.backend.removes), 44) // then done, six settles on
		})
	}
}

// The record keeps when each consumer was withdrawn, not that an operator let a mass
// withdrawal stand: a process that starts within the hour after one counts it again, and holds
// the next step for six settles rather than one (the safe side), where the process that let it
// stand would not.
func TestARestartAfterAMassWithdrawalWasLetStandHoldsTheNextStep(t *testing.T) {
	is := is.New(t)
	w, all := applied(t, 10)
	w.contributions(all[:4]...) // 6 of 10: a mass withdrawal
	w.pass(0)
	w.pass(6 * settle)
	is.Equal(len(w.backend.removes), 6) // let stand

	w.configure(domain.Config{}) // restarted
	w.contributions()            // the last 4
	w.pass(time.Minute)
	r := w.pass(settle)
	is.True(r.MassWithdrawal)           // 10 of the 10 of this hour
	is.Equal(len(w.backend.removes), 6) // held
	w.pass(5 * settle)
	is.Equal(len(w.backend.removes), 10)        // then done
	is.Equal(w.log.count("WITHDRAWAL HELD"), 2) // each step said
}

// Withdrawals of more than an hour ago are not in the rebuilt baseline.
func TestARestartAnHourOnCountsOnlyTheLastHour(t *testing.T) {
	is := is.New(t)
	w, all := applied(t, 10)
	w.contributions(all[:6]...) // 4 of 10
	w.pass(0)
	is.Equal(w.pass(settle).Withdrawn, 4)
	w.clk.Add(time.Hour)
	w.configure(domain.Config{}) // restarted an hour on
	w.contributions(all[:3]...)  // 3 of 6
	w.pass(0)
	r := w.pass(settle)
	is.True(!r.MassWithdrawal)
	is.Equal(r.Withdrawn, 3)
}
