package domain_test

import (
	"slices"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

// insideCfg is a loop whose looks inside the consumers' databases are on a budget of every.
func insideCfg(every time.Duration, rate int) domain.Config {
	return domain.Config{Every: 5 * time.Second, VerifyEvery: time.Minute, InsideCheckEvery: every, InsideRate: rate}
}

// looksOf is every look inside the backend made, by consumer, in order.
func (w *world) looksOf() map[string][]time.Time {
	w.backend.mu.Lock()
	defer w.backend.mu.Unlock()
	return byConsumer(w.backend.looks)
}

// mostLooksInASecond is the most looks inside the backend made within any second.
func (w *world) mostLooksInASecond() int {
	w.backend.mu.Lock()
	defer w.backend.mu.Unlock()
	return mostInASecond(w.backend.looks)
}

// Looks inside are granted on their own budget: never more than the ceiling within a second,
// every consumer's database looked into within the interval, spread evenly, while every other
// check is still made every verify pass.
func TestLooksInsideAreSpreadWithinTheirCeiling(t *testing.T) {
	is := is.New(t)
	const n, rate = 400, 2
	every := 10 * time.Minute
	w, names := loginWorld(t, n, insideCfg(every, rate))
	start := w.clk.Now()
	w.runFor(50 * time.Minute)
	end := w.clk.Now()

	is.True(w.mostLooksInASecond() <= rate) // never more than the ceiling within a second
	looks := w.looksOf()
	spread(t, "looks inside", looks, names, start, end, every)
	for _, as := range names {
		is.True(len(looks[as]) <= 50/10+2) // at its budget, not at each of the 50 verify passes
	}
	is.True(w.checksOf(names[n-1]) >= 49) // the rest of a check at every verify pass
}

// What changed inside a consumer's database behind the provider's back (an extension dropped
// by hand) is found by its next look inside, within the interval, and repaired; verify passes
// that do not look inside do not call it held on that account, nor unheld.
func TestAChangeInsideIsFoundByItsLookAndRepaired(t *testing.T) {
	is := is.New(t)
	every := 10 * time.Minute
	w, names := loginWorld(t, 50, insideCfg(every, 0))
	w.runFor(15 * time.Minute)
	as := names[17]
	w.backend.mu.Lock()
	m := w.backend.store[as]
	m.insideGone = true
	w.backend.store[as] = m
	w.backend.mu.Unlock()
	changed := w.clk.Now()
	w.log.take()

	for w.clk.Now().Sub(changed) <= every && !slices.Contains(w.log.audit(), as+": repaired (inside)") {
		w.pass(w.h.UntilNext())
	}
	is.True(slices.Contains(w.log.audit(), as+": repaired (inside)")) // found and repaired within the interval
	w.backend.mu.Lock()
	is.True(!w.backend.store[as].insideGone)
	w.backend.mu.Unlock()
}

// SIGHUP has every consumer's database looked into at once, within the ceiling; and a start
// does not: the consumers it confirms are looked into at their places over the interval.
func TestSIGHUPLooksInsideEveryConsumerAndAStartSpreadsThem(t *testing.T) {
	is := is.New(t)
	const n, rate = 30, 10
	every := time.Hour
	cfg := insideCfg(every, rate)
	w, names := loginWorld(t, n, cfg)
	w.runFor(2 * time.Hour)

	w.configure(cfg) // a start: the backend holds them all
	w.backend.mu.Lock()
	w.backend.looks = nil
	w.backend.mu.Unlock()
	w.runFor(2 * time.Minute)
	is.True(len(w.looksOf()) < n/2) // not all at once after the start
	is.True(w.mostLooksInASecond() <= rate)

	w.backend.mu.Lock()
	w.backend.looks = nil
	w.backend.mu.Unlock()
	w.h.RetryNow()
	hup := w.clk.Now()
	w.runFor(5 * time.Second)
	looks := w.looksOf()
	for _, as := range names {
		is.True(len(looks[as]) >= 1)                   // every one looked into
		is.True(looks[as][0].Sub(hup) < 4*time.Second) // at once, as fast as the ceiling lets it
	}
	is.True(w.mostLooksInASecond() <= rate)
	r := w.pass(time.Second)
	is.True(!r.Status[0].InsideCheckedAt.Before(hup)) // /status says when
}

// A check that did not look inside says nothing of the staged changes inside: what the last
// look found stays on /status, and the rollout goes on with the next look.
func TestACheckThatDoesNotLookInsideLeavesTheStagedChangesAsTheyWere(t *testing.T) {
	is := is.New(t)
	cfg := insideCfg(10*time.Minute, 0)
	cfg.Updates = domain.Off
	w, names := loginWorld(t, 3, cfg)
	w.runFor(2 * time.Minute)
	w.backend.mu.Lock()
	w.backend.due = map[string][]ports.Update{names[1]: {vectorUpdate()}}
	w.backend.mu.Unlock()
	r := w.pass(0)
	for i := 0; i < 30 && len(r.Status[1].Updates) == 0; i++ {
		r = w.pass(w.h.UntilNext())
	}
	is.Equal(r.Status[1].Updates, []string{"extension vector 0.8.0, wanted 0.8.6"}) // found by its look inside
	looked := r.Status[1].InsideCheckedAt
	for range 3 {
		r = w.pass(time.Minute) // verify passes that do not look inside it
	}
	is.Equal(r.Status[1].InsideCheckedAt, looked)                                   // not looked into since
	is.True(r.Status[1].CheckedAt.After(looked))                                    // though checked
	is.Equal(r.Status[1].Updates, []string{"extension vector 0.8.0, wanted 0.8.6"}) // still said
}

// A single run (--once) looks inside every consumer it checks: there is no later pass.
func TestOnceLooksInsideEveryCheck(t *testing.T) {
	is := is.New(t)
	cfg := insideCfg(time.Hour, 1)
	w, names := loginWorld(t, 20, cfg)
	w.runFor(2 * time.Minute)
	cfg.Once = true
	w.configure(cfg)
	w.backend.mu.Lock()
	w.backend.looks = nil
	w.backend.mu.Unlock()
	w.pass(0)
	is.Equal(len(w.looksOf()), len(names))
}

// Without a budget (InsideCheckEvery zero, or no longer than VerifyEvery) every check looks
// inside, as before the budget.
func TestEveryCheckLooksInsideWithoutABudget(t *testing.T) {
	is := is.New(t)
	for _, every := range []time.Duration{0, time.Minute} {
		w, names := loginWorld(t, 10, insideCfg(every, 1))
		w.runFor(5 * time.Minute)
		w.backend.mu.Lock()
		checks, looks := len(w.backend.holdsCalls), len(w.backend.looks)
		w.backend.mu.Unlock()
		is.Equal(checks, 5*len(names)) // a check of each at every verify pass
		is.Equal(looks, checks)        // each looked inside, beyond the ceiling
	}
}
