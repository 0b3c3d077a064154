package domain

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/novox/postgres-provider/ports"
)

// Progress is where the pass under way stands, for those who watch a long one (an operator's
// /status, the counters, a line now and then) while the loop's own lines wait for it to settle.
// Its counts are of the backend calls that have returned this pass, classed as the pass's
// Report will count them once it settles.
type Progress struct {
	// Running is whether a pass is under way; the rest says where it stands.
	Running bool
	// Pass numbers the passes of this process from 1: counts of a new pass start from zero.
	Pass int64
	// Started is when the pass started, by the loop's clock.
	Started time.Time
	// Doing is what the pass is doing: "reading the file", "reading secrets", "reading the
	// record", "planning", "creating", "checking", "applying again", "settling" or
	// "withdrawing"; Done of Of of its steps are done (calls that returned, secrets read,
	// checks answered), counted from Since; Of is 0 where it is one step.
	Doing    string
	Done, Of int
	Since    time.Time
	// Created, Reapplied, Withdrawn, Dropped and Failures count the calls that returned this
	// pass as the Report's fields of the same names will.
	Created, Reapplied, Withdrawn, Dropped, Failures int
}

// Left is about how long what the pass is doing has left at now, from how fast its calls have
// returned since it began; ok is false before one has.
func (p Progress) Left(now time.Time) (left time.Duration, ok bool) {
	if !p.Running || p.Done == 0 || p.Done >= p.Of {
		return 0, false
	}
	took := now.Sub(p.Since)
	return time.Duration(float64(took) / float64(p.Done) * float64(p.Of-p.Done)), true
}

// progress is the pass's Progress as the loop's goroutines move it: the runner's calls return on
// goroutines of their own, and Progress is read from any.
type progress struct {
	mu  sync.Mutex
	now Progress
	// listed is, during a pass before any has settled (the first, which at thousands of
	// consumers takes minutes), every listed consumer in the file's order, each as its call
	// returned, else unchecked: what /status shows until the pass settles (Settling).
	listed []Status
}

// Progress is where the pass under way stands; Running is false between passes. It may be
// called from any goroutine.
func (h *Harness) Progress() Progress {
	h.doing.mu.Lock()
	defer h.doing.mu.Unlock()
	return h.doing.now
}

// begin starts a pass's Progress.
func (h *Harness) begin() {
	h.doing.mu.Lock()
	defer h.doing.mu.Unlock()
	now := h.clock.Now()
	h.doing.now = Progress{Running: true, Pass: h.doing.now.Pass + 1, Started: now, Doing: "reading the file", Since: now}
}

// end marks the pass over.
func (h *Harness) end() {
	h.doing.mu.Lock()
	defer h.doing.mu.Unlock()
	h.doing.now.Running = false
	h.doing.listed = nil
}

// Settling is, while the first pass runs (no pass has settled a listing yet), every consumer
// the file lists, in its order: as its create returned (applied, incomplete, failing or
// refused; said, with the reason, once the pass settles), else unchecked. Nil otherwise: the
// last pass's Report says where each stands. It may be called from any goroutine.
func (h *Harness) Settling() []Status {
	h.doing.mu.Lock()
	defer h.doing.mu.Unlock()
	if !h.doing.now.Running || h.doing.listed == nil {
		return nil
	}
	return slices.Clone(h.doing.listed)
}

// listing starts Settling's list for a pass that reads items before any pass has settled a
// listing; later passes keep none (the last Report's stands, and copying it every pass would
// cost what the loop saves by not).
func (h *Harness) listing(items []*item) {
	if h.viewStatus != nil {
		return
	}
	listed := make([]Status, len(items))
	for i, it := range items {
		listed[i] = Status{As: it.c.as, State: stateOf(it)} // nothing settled yet: its secret, else unchecked
	}
	h.doing.mu.Lock()
	defer h.doing.mu.Unlock()
	h.doing.listed = listed
}

// returnedState is where a listed consumer whose create just returned stands, as settle will
// find it, for Settling.
func returnedState(it *item) State {
	switch {
	case it.err == nil && len(it.lacks) > 0: // creates took an *ports.Incomplete as lacks
		return StateIncomplete
	case it.err == nil:
		return StateApplied
	case ports.IsRefusal(it.err):
		return StateRefused
	}
	return StateFailing
}

// phase says the pass now does doing, of calls to the backend.
func (h *Harness) phase(doing string, calls int) {
	h.doing.mu.Lock()
	defer h.doing.mu.Unlock()
	p := &h.doing.now
	p.Doing, p.Done, p.Of, p.Since = doing, 0, calls, h.clock.Now()
}

// phaseDone counts every call of the phase as returned.
func (h *Harness) phaseDone() {
	h.doing.mu.Lock()
	defer h.doing.mu.Unlock()
	h.doing.now.Done = h.doing.now.Of
}

// returned counts n calls of the phase that returned, and the backend call it made for it (nil
// for checks), as settle will count it.
func (h *Harness) returned(n int, it *item) {
	h.doing.mu.Lock()
	defer h.doing.mu.Unlock()
	p := &h.doing.now
	p.Done = min(p.Done+n, p.Of)
	if it != nil && it.act != withdraw && it.act != drop && it.index < len(h.doing.listed) {
		h.doing.listed[it.index].State, h.doing.listed[it.index].Since = returnedState(it), h.clock.Now()
	}
	switch {
	case it == nil:
	case it.act == check && it.answer().Held:
		// Held, and let make a staged change (settleCheck): no re-apply, and a failed update
		// halts its rollout rather than failing the consumer.
		if failed := new(ports.UpdateFailed); it.err != nil && !errors.As(it.err, &failed) {
			p.Failures++
		}
	case it.err != nil:
		p.Failures++
	case it.act == drop:
		p.Dropped++
		if it.active {
			p.Withdrawn++
		}
	case it.act == withdraw:
		p.Withdrawn++
	case it.act == check:
		p.Reapplied++
	default: // create, and confirm: one made before, not as asked, is a create like any other
		p.Created++
	}
}
