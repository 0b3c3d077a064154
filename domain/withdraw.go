package domain

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/novox/postgres-provider/ports"
)

// Withdrawal happens on firm ground only: the record of what is managed was read, every entry
// of the file could be, and the file has settled; a withdrawal of more than half of what was
// managed within the last hour (however it was split into steps) waits six times as long.

// hold is how long the file must have stayed unchanged before leaving is withdrawn, and
// whether that is because it is a mass withdrawal: more than half (and more than 3) of the
// most consumers managed within the last hour would then be gone, however the withdrawal was
// split into steps. A file emptied by mistake is given six times as long to be put right.
func (h *Harness) hold(leaving []*item) (time.Duration, bool) {
	gone, most := h.goneOf(leaving)
	mass := gone > 3 && gone*2 > most
	return h.settleFor(mass), mass
}

// settleFor is how long the file must have stayed unchanged before a withdrawal: six times
// Config.WithdrawSettle for a mass withdrawal.
func (h *Harness) settleFor(mass bool) time.Duration {
	if mass {
		return massFactor * h.cfg.WithdrawSettle
	}
	return h.cfg.WithdrawSettle
}

// withdrawalDue is when a withdrawal that waits for the file to settle falls due, should the
// file stay as it is.
func (h *Harness) withdrawalDue(mass bool) time.Time {
	return h.clock.Now().Add(max(h.settleFor(mass)-h.settled(mass), 0))
}

// goneOf is how many of the most consumers managed within the last hour would be gone once
// leaving is withdrawn, and that most.
func (h *Harness) goneOf(leaving []*item) (gone, most int) {
	managed := h.consumers.count()
	most = max(h.peak.most(), managed)
	return most - (managed - countActive(leaving)), most
}

// earlier says, where consumers were withdrawn within the last hour before this step, how
// many of the most managed in that hour this withdrawal would leave gone.
func (h *Harness) earlier(leaving []*item) string {
	gone, most := h.goneOf(leaving)
	if gone == countActive(leaving) {
		return ""
	}
	return fmt.Sprintf(" (with those withdrawn before, %d of the %d it managed within the last hour)", gone, most)
}

// due is whether a withdrawal would happen this pass.
func (h *Harness) due(leaving []*item) bool {
	if len(leaving) == 0 || h.file.bad > 0 {
		return false
	}
	need, mass := h.hold(leaving)
	return h.settled(mass) >= need
}

// withdraw takes what the file no longer lists away from the backend, on firm ground only: the
// record of what is managed was read, every entry of the file could be, and the file has
// settled. The lease is asked once more first: a replica that lost it must not act.
func (h *Harness) withdraw(ctx context.Context, leaving []*item, r *Report) {
	if h.recordRead {
		h.peak.note(h.clock.Now(), h.consumers.count())
	}
	if len(leaving) == 0 {
		h.mass, h.heldUntil = false, time.Time{}
		return
	}
	r.WithdrawalsHeld = len(leaving)
	h.heldUntil = time.Time{}
	if h.file.bad > 0 || !h.recordRead {
		return
	}
	need, mass := h.hold(leaving)
	if settled := h.settled(mass); settled < need {
		h.heldUntil = h.withdrawalDue(mass)
		r.MassWithdrawal = mass
		if mass && !h.mass {
			h.say(slog.LevelError, "", "WITHDRAWAL HELD: %s no longer lists %d of the %d consumers the provider manages%s; "+
				"they are withdrawn only once the file has stayed unchanged for %s. If that is not meant, put the file right now",
				h.cfg.Receives, countActive(leaving), h.consumers.count(), h.earlier(leaving), need)
		}
		h.mass = mass
		if !mass && !h.cfg.Once { // a mass withdrawal's line, and a single pass's, say it for all
			h.sayWaiting(leaving, need)
		}
		if h.cfg.Once {
			h.say(slog.LevelInfo, "", "%d consumer(s) no longer in %s not withdrawn yet: it changed %s ago, and withdrawals "+
				"wait until it has stayed unchanged for %s", len(leaving), h.cfg.Receives, settled.Round(time.Second), need)
		}
		return
	}
	if !h.askLease(ctx, r) {
		return
	}
	r.WithdrawalsHeld, h.mass = 0, false
	if mass {
		defer func() { h.peak.reset(h.clock.Now(), h.consumers.count()) }() // what the operator let stand is the new baseline
	}
	for _, it := range leaving {
		if c := it.c; c.removing == nil {
			if it.active {
				h.say(slog.LevelInfo, c.as, "%s: no longer in %s; withdrawing it from the backend", c.as, h.cfg.Receives)
			} else {
				h.say(slog.LevelInfo, c.as, "%s: withdrawn %s ago; dropping it from the backend", c.as,
					withdrawnFor(c, h.clock.Now()).Round(time.Second))
			}
			c.removing = &repeat{}
		}
	}
	h.removals(ctx, leaving)
	h.settleLeaving(leaving, r)
}

func countActive(leaving []*item) int {
	n := 0
	for _, l := range leaving {
		if l.active {
			n++
		}
	}
	return n
}

// baselineWindow is how far back the mass-withdrawal brake looks for the most consumers managed.
const baselineWindow = time.Hour

// peaks keeps the most consumers managed within the last baselineWindow: samples in time order
// whose counts fall, so that the first is the most (a monotonic queue).
type peaks struct{ samples []sample }

type sample struct {
	at time.Time
	n  int
}

// note counts n consumers managed at now.
func (p *peaks) note(now time.Time, n int) {
	for len(p.samples) > 0 && now.Sub(p.samples[0].at) > baselineWindow {
		p.samples = p.samples[1:]
	}
	for len(p.samples) > 0 && p.samples[len(p.samples)-1].n <= n {
		p.samples = p.samples[:len(p.samples)-1]
	}
	p.samples = append(p.samples, sample{at: now, n: n})
}

// most is the most consumers noted within the window; 0 before any.
func (p *peaks) most() int {
	if len(p.samples) == 0 {
		return 0
	}
	return p.samples[0].n
}

// rebuild notes what the backend's record says of the last baselineWindow, for a replica that
// starts or takes the lease knowing nothing of what was withdrawn before it: the record keeps
// each withdrawal's time, and counting back from the n managed now, one more was managed just
// before each of them. A consumer made since a withdrawal counts as managed before it too, and
// one dropped within the window leaves no sample: the first errs on the brake's side, the
// second only where --drop-after is under an hour. A withdrawal dated in the future counts as
// now.
func (p *peaks) rebuild(now time.Time, n int, record []ports.Managed) {
	var times []time.Time
	for _, m := range record {
		if m.Withdrawn && !m.Since.IsZero() && now.Sub(m.Since) <= baselineWindow {
			times = append(times, minTime(m.Since, now))
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	for i, at := range times {
		p.note(at, n+len(times)-i)
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// reset forgets every sample but n at now.
func (p *peaks) reset(now time.Time, n int) { p.samples = []sample{{at: now, n: n}} }

// sayWaiting says, once for each consumer whose withdrawal waits for the file to settle and
// again only should the file change, when it falls due: a withdrawal, and a drop, is never
// the first the operator hears of it.
func (h *Harness) sayWaiting(leaving []*item, need time.Duration) {
	due := h.withdrawalDue(false)
	for _, it := range leaving {
		c := it.c
		if !it.active || c.left().waitSaid.Equal(h.file.changedAt) {
			continue
		}
		c.leave().waitSaid = h.file.changedAt
		then := "withdrawn at " + due.UTC().Format(time.RFC3339)
		if h.cfg.OnWithdraw == Drop {
			then += " and dropped with its data at " + due.Add(h.cfg.DropAfter).UTC().Format(time.RFC3339)
		}
		h.say(slog.LevelInfo, c.as, "%s: no longer in %s; %s, once the file has stayed unchanged for %s, unless it is listed again",
			c.as, h.cfg.Receives, then, need)
	}
}
