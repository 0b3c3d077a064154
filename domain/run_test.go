package domain_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

// waitFor receives from ch, failing the test if the loop never gets there.
func waitFor[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second): // a guard against a hang, not a timing
		t.Fatal("the loop did not get there")
		var zero T
		return zero
	}
}

// advance moves the clock on a second at a time until done closes: Run waits on the clock from
// its own goroutine, and Mock.Add fires only the timers already set.
func advance(w *world, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		default:
			w.clk.Add(time.Second)
			runtime.Gosched()
		}
	}
}

// running runs w's loop until c ends, handing each pass's Report to passes; done closes when
// Run returns.
func running(c context.Context, w *world, wake <-chan struct{}) (passes <-chan domain.Report, done <-chan struct{}) {
	reports, ended := make(chan domain.Report), make(chan struct{})
	go func() {
		w.h.Run(c, wake, func(r domain.Report) {
			select {
			case reports <- r:
			case <-c.Done(): // the test stopped listening: a pass the clock fired after it had seen enough
			}
		})
		close(ended)
	}()
	return reports, ended
}

func TestRunPassesOnTheTimerAndOnWake(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/letta", "pw")
	w.contributions(consumer("letta", "/s/letta"))
	wake := make(chan struct{})
	c, cancel := context.WithCancel(ctx)
	passes, done := running(c, w, wake)

	r := waitFor(t, passes)
	is.Equal(r.Created, 1) // the first pass runs at once

	wake <- struct{}{} // a change to the file
	r = waitFor(t, passes)
	is.True(r.FileRead) // a pass ran without the clock moving

	start := w.clk.Now() // before the clock starts moving
	go advance(w, done)  // time passes until Run's timer fires
	waitFor(t, passes)
	is.True(w.clk.Now().Sub(start) >= domain.DefaultEvery) // the timer's pass came after Every

	cancel()
	waitFor(t, done) // Run stops when its context ends
}

// A wake-up (a change the watch saw) has the next pass look at each secret, where the timer's
// passes take them as last read (WatchedBy).
func TestAWakeUpLooksAtTheSecretsAgain(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/letta", "pw")
	w.contributions(consumer("letta", "/s/letta"))
	w.h.WatchedBy(func() bool { return true })
	wake := make(chan struct{})
	c, cancel := context.WithCancel(ctx)
	defer cancel()
	passes, _ := running(c, w, wake)
	waitFor(t, passes)
	is.Equal(w.backend.createsOf("letta"), 1)
	w.write("/s/letta", "rotated")
	wake <- struct{}{}
	waitFor(t, passes)
	is.Equal(w.backend.createsOf("letta"), 2) // the rotation applied at once
}

func TestRunLetsThePassUnderWayFinish(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/letta", "pw")
	w.contributions(consumer("letta", "/s/letta"))
	started := make(chan struct{})
	ended := make(chan error, 1)
	var stoppedAt time.Time
	w.backend.createFn = func(c context.Context, p ports.Provision) {
		close(started)
		<-c.Done() // a create that takes as long as it is let
		ended <- c.Err()
	}
	c, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		w.h.Run(c, nil, nil)
		close(done)
	}()
	waitFor(t, started)
	cancel()
	stoppedAt = w.clk.Now()
	go advance(w, done)
	err := waitFor(t, ended)
	waitFor(t, done)
	is.Equal(err, context.Canceled)                                   // the pass's context ended
	is.True(w.clk.Now().Sub(stoppedAt) >= domain.DefaultHoldsTimeout) // but not before the holds timeout
	is.Equal(w.backend.createsOf("letta"), 1)                         // the create under way was not cut off at once
}

func TestRunPassesWhenAHeldWithdrawalFallsDue(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.configure(domain.Config{Every: time.Hour, WithdrawSettle: 10 * time.Second})
	w.write("/s/letta", "pw")
	w.write("/s/bob", "pw")
	w.contributions(consumer("letta", "/s/letta"), consumer("bob", "/s/bob"))
	w.pass(0)
	w.contributions(consumer("bob", "/s/bob"))
	changed := w.clk.Now()
	c, cancel := context.WithCancel(ctx)
	defer cancel()
	passes, done := running(c, w, nil)
	r := waitFor(t, passes)
	is.Equal(r.WithdrawalsHeld, 1) // the first pass holds it: the file just changed
	stop := make(chan struct{})
	go advance(w, stop)
	r = waitFor(t, passes)
	close(stop)
	is.Equal(r.Withdrawn, 1) // the next pass withdrew it
	w.backend.mu.Lock()
	at := w.backend.store["letta"].since // when the backend withdrew it, by the clock
	w.backend.mu.Unlock()
	is.True(at.Sub(changed) < 12*time.Second)  // when it fell due, not an --every (an hour) later
	is.True(at.Sub(changed) >= 10*time.Second) // and not before
	cancel()
	waitFor(t, done)
}
