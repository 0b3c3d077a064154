package domain

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/novox/postgres-provider/ports"
)

// run asks the backend what the plan says of the listed consumers: the creates first, then
// every check in one batch, then the creates of what the checks found lost. Every answer
// counts. The backend stops checking after a check that timed out; the checks it did not make,
// and the one that timed out (once), are asked on the next pass, which starts where this one
// stopped, so that a timeout never leaves the consumers after it unchecked for good.
func (h *Harness) run(ctx context.Context, items []*item) {
	h.refuseClashes(items)
	h.creates(ctx, items, "creating", func(it *item) bool { return it.act == create && !it.called })

	var checks []*item
	for _, it := range items {
		if it.act == check || it.act == confirm {
			checks = append(checks, it)
		}
	}
	if len(checks) == 0 {
		return
	}
	// Where the last pass stopped first, then the rest in the file's order.
	at, _ := slices.BinarySearchFunc(checks, h.resume, func(it *item, i int) int { return it.index - i })
	checks = append(checks[at:len(checks):len(checks)], checks[:at]...)
	ps := make([]ports.Provision, len(checks))
	for i, it := range checks {
		ps[i] = it.provision()
	}
	h.phase("checking", len(ps))
	start := h.clock.Now()
	// The count moves as the backend answers (a batch of checks inside databases takes a
	// minute), and stands at every check once the batch has returned.
	traced := ports.WithCheckTrace(ctx, &ports.CheckTrace{Answered: func(n int) { h.returned(n, nil) }})
	answers := h.backend.HoldsAll(traced, ps, h.cfg.HoldsTimeout)
	h.step()
	h.phaseDone()
	h.debug("", "checks: %d consumers asked in one batch in %s", len(ps), h.clock.Now().Sub(start))
	h.resume = 0
	stopped := false
	for i, it := range checks {
		it.checked = &answers[i]
		err := it.answer().Err
		switch {
		case err != nil && (errors.Is(err, ports.ErrNotAsked) || ctx.Err() != nil):
			it.notAsked = true
			if !stopped {
				stopped, h.resume = true, it.index
			}
		default:
			it.asked, it.timedOut = true, errors.Is(err, context.DeadlineExceeded)
		}
		c := it.c
		timeouts := c.unasked // its own, this verify round
		if !it.continued {
			timeouts = 0
		}
		c.isUnasked, c.unasked = false, 0
		switch {
		case it.notAsked:
			c.isUnasked, c.unasked = true, timeouts
		case it.timedOut && timeouts == 0:
			c.isUnasked, c.unasked = true, 1 // asked once more; a check that keeps timing out waits for the next round
		}
	}
	h.stage(checks)
	h.creates(ctx, items, "applying again", func(it *item) bool {
		return it.asked && it.answer().Err == nil && (!it.answer().Held || len(it.updates) > 0)
	})
}

// refuseClashes refuses, before any call, each new consumer (neither applied nor recorded) to
// be created this pass that asks for what a consumer earlier in the file asks for too (the same
// database), where that one is new and to be created too, or may have it already (applied or
// recorded): which of two new consumers has it is the file's order, not the order their
// concurrent creates finish in. The refusal is the one Create gives once the earlier has it,
// and backs off as Create's would. What is not new is left to Create, which knows who has it.
func (h *Harness) refuseClashes(items []*item) {
	isNew := func(it *item) bool { return it.act == create && !it.c.applied && !it.c.recorded }
	var asking []*item
	news := 0
	for _, it := range items {
		switch {
		case !it.usable():
		case isNew(it):
			asking = append(asking, it)
			news++
		case it.act == create || it.c.applied || it.c.recorded:
			asking = append(asking, it)
		}
	}
	if news == 0 || len(asking) < 2 {
		return
	}
	ps := make([]ports.Provision, len(asking))
	for i, it := range asking {
		ps[i] = it.provision()
	}
	for i, err := range h.backend.Clashes(ps) {
		if it := asking[i]; err != nil && isNew(it) {
			it.called, it.err, it.did = true, err, ports.ActRefuse // as if Create had said it
		}
	}
}

// creates calls Create for each item that which picks, doing what Progress says.
func (h *Harness) creates(ctx context.Context, items []*item, doing string, which func(*item) bool) {
	h.call(ctx, items, doing, which, func(it *item) {
		it.did, it.err = h.backend.Create(ctx, it.provision())
		if incomplete := (*ports.Incomplete)(nil); errors.As(it.err, &incomplete) {
			it.lacks, it.err = incomplete.Lacks, nil // made as far as it can be: its state says the rest
		}
	})
}

// removals calls Remove or Drop for each leaving consumer.
func (h *Harness) removals(ctx context.Context, leaving []*item) {
	h.call(ctx, leaving, "withdrawing", func(*item) bool { return true }, func(it *item) {
		if it.act == drop {
			it.err = h.backend.Drop(ctx, it.c.as)
		} else {
			it.err = h.backend.Remove(ctx, it.c.as)
		}
	})
}

// call is the pass's one runner: fn (a backend call) for each item that which picks, at most
// Config.Parallel at once, returning when all have; Progress says it does doing, and counts
// each call as it returns. What a stop (ctx ending) finds not started is left as it is, and not
// said.
func (h *Harness) call(ctx context.Context, items []*item, doing string, which func(*item) bool, fn func(*item)) {
	var picked []*item
	for _, it := range items {
		if which(it) {
			picked = append(picked, it)
		}
	}
	if len(picked) > 0 {
		h.phase(doing, len(picked))
	}
	one := func(it *item) {
		if ctx.Err() != nil {
			return
		}
		it.called = true
		start := h.clock.Now()
		fn(it)
		h.step()
		h.returned(1, it)
		outcome := "done"
		if it.err != nil {
			outcome = "failed"
		}
		h.debug(it.c.as, "%s: %s %s in %s", it.c.as, it.act.call(), outcome, h.clock.Now().Sub(start))
	}
	if h.cfg.Parallel <= 1 || len(picked) <= 1 {
		for _, it := range picked {
			one(it)
		}
		return
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, h.cfg.Parallel)
	for _, it := range picked {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			one(it)
		}()
	}
	wg.Wait()
}
