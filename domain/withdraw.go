package domain

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/novox/postgres-provider/ports"
)

// leaver is a consumer the file no longer lists that the backend still holds something of.
type leaver struct {
	as     string
	active bool // its login still works
	drop   bool // this withdrawal drops it; otherwise its login goes and its data stays
	since  time.Time
	err    error
}

// leaving is every consumer the file no longer lists that is to be withdrawn or dropped: what
// this process applied, and what the backend's record says is managed, whoever applied it. With
// Drop, a consumer withdrawn for DropAfter is dropped. In sorted order.
func (h *Harness) leaving(want map[string]bool) []*leaver {
	now := h.clock.Now()
	if h.noneLeaving == h.changes && now.Before(h.nextDrop) {
		return nil // nothing listed, applied or recorded changed since nobody was leaving
	}
	h.nextDrop = now.Add(maxBackoff)
	var out []*leaver
	for as := range h.applied {
		if !want[as] {
			out = append(out, &leaver{as: as, active: true})
		}
	}
	for as, m := range h.record {
		if _, applied := h.applied[as]; want[as] || applied {
			continue
		}
		switch due := h.withdrawnSince(as, m).Add(h.cfg.DropAfter); {
		case !m.Withdrawn:
			out = append(out, &leaver{as: as, active: true})
		case h.cfg.OnWithdraw != Drop || m.Since.IsZero():
		case !now.Before(due):
			out = append(out, &leaver{as: as, since: m.Since, drop: true})
		case due.Before(h.nextDrop):
			h.nextDrop = due
		}
	}
	for _, l := range out {
		if l.active {
			l.drop = h.cfg.OnWithdraw == Drop && h.cfg.DropAfter == 0
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].as < out[j].as })
	h.noneLeaving = -1
	if len(out) == 0 {
		h.noneLeaving = h.changes
	}
	return out
}

// withdrawnSince is when m counts as withdrawn from, for its drop: the later of what its
// record says and when this process first saw it withdrawn. A record is not trusted to shorten
// the delay: anyone allowed to write it could date it back.
func (h *Harness) withdrawnSince(as string, m ports.Managed) time.Time {
	seen, ok := h.seenWithdrawn[as]
	if !ok {
		seen = h.clock.Now()
		h.seenWithdrawn[as] = seen
	}
	if m.Since.After(seen) {
		return m.Since
	}
	return seen
}

// hold is how long the file must have stayed unchanged before leaving is withdrawn, and
// whether that is because it is a mass withdrawal: more than half (and more than 3) of the
// most consumers managed within the last hour would then be gone, however the withdrawal was
// split into steps. A file emptied by mistake is given six times as long to be put right.
func (h *Harness) hold(leaving []*leaver) (time.Duration, bool) {
	if gone, most := h.goneOf(leaving); gone > 3 && gone*2 > most {
		return massFactor * h.cfg.WithdrawSettle, true
	}
	return h.cfg.WithdrawSettle, false
}

// goneOf is how many of the most consumers managed within the last hour would be gone once
// leaving is withdrawn, and that most.
func (h *Harness) goneOf(leaving []*leaver) (gone, most int) {
	managed := h.managed()
	most = max(h.peak.most(), managed)
	return most - (managed - countActive(leaving)), most
}

// earlier says, where consumers were withdrawn within the last hour before this step, how
// many of the most managed in that hour this withdrawal would leave gone.
func (h *Harness) earlier(leaving []*leaver) string {
	gone, most := h.goneOf(leaving)
	if gone == countActive(leaving) {
		return ""
	}
	return fmt.Sprintf(" (with those withdrawn before, %d of the %d it managed within the last hour)", gone, most)
}

// managed counts the active consumers the provider manages, as far as the loop knows.
func (h *Harness) managed() int {
	n := len(h.applied)
	for as, m := range h.record {
		if _, applied := h.applied[as]; !applied && !m.Withdrawn {
			n++
		}
	}
	return n
}

// due is whether a withdrawal would happen this pass.
func (h *Harness) due(leaving []*leaver) bool {
	if len(leaving) == 0 || h.file.bad > 0 {
		return false
	}
	need, mass := h.hold(leaving)
	return h.settled(mass) >= need
}

// withdraw takes what the file no longer lists away from the backend, on firm ground only: the
// record of what is managed was read, every entry of the file could be, and the file has
// settled. The lease is asked once more first: a replica that lost it must not act. Failures
// are said the first time and every loudlyEvery-th, and tried again next pass.
func (h *Harness) withdraw(ctx context.Context, leaving []*leaver, r *Report) {
	if h.recordRead {
		h.peak.note(h.clock.Now(), h.managed())
	}
	if len(leaving) == 0 {
		h.mass = false
		return
	}
	r.WithdrawalsHeld = len(leaving)
	if h.file.bad > 0 || !h.recordRead {
		return
	}
	need, mass := h.hold(leaving)
	if settled := h.settled(mass); settled < need {
		r.MassWithdrawal = mass
		if mass && !h.mass {
			h.say(slog.LevelError, "", "WITHDRAWAL HELD: %s no longer lists %d of the %d consumers the provider manages%s; "+
				"they are withdrawn only once the file has stayed unchanged for %s. If that is not meant, put the file right now",
				h.cfg.Receives, countActive(leaving), h.managed(), h.earlier(leaving), need)
		}
		h.mass = mass
		if h.cfg.Once {
			h.say(slog.LevelInfo, "", "%d consumer(s) no longer in %s not withdrawn yet: it changed %s ago, and withdrawals "+
				"wait until it has stayed unchanged for %s", len(leaving), h.cfg.Receives, settled.Round(time.Second), need)
		}
		return
	}
	if !h.leading(ctx, r) {
		return
	}
	r.WithdrawalsHeld, h.mass = 0, false
	if mass {
		defer func() { h.peak.reset(h.clock.Now(), h.managed()) }() // what the operator let stand is the new baseline
	}

	for _, l := range leaving {
		if h.removing[l.as] == nil {
			if l.active {
				h.say(slog.LevelInfo, l.as, "%s: no longer in %s; withdrawing it from the backend", l.as, h.cfg.Receives)
			} else {
				h.say(slog.LevelInfo, l.as, "%s: withdrawn %s ago; dropping it from the backend", l.as,
					h.clock.Now().Sub(l.since).Round(time.Second))
			}
			h.removing[l.as] = &repeat{}
		}
	}
	h.each(len(leaving), func(i int) {
		l := leaving[i]
		if l.drop {
			l.err = h.backend.Drop(ctx, l.as)
		} else {
			l.err = h.backend.Remove(ctx, l.as)
		}
		h.step()
	})
	for _, l := range leaving {
		h.settleLeaver(l, r)
	}
}

// settleLeaver records one withdrawal or drop.
func (h *Harness) settleLeaver(l *leaver, r *Report) {
	if l.err != nil {
		r.Failures++
		verb := "remove"
		if !l.active {
			verb = "drop"
		}
		text := h.scrubbed(l.as, l.err)
		if h.removing[l.as].again(text) {
			h.say(slog.LevelWarn, l.as, "%s: %s failed%s: %s", l.as, verb, h.retrying(", will retry"), text)
		}
		return
	}
	if l.active {
		r.Withdrawn++
	}
	delete(h.applied, l.as)
	h.changes++
	delete(h.lost, l.as)
	h.dropPassword(l.as)
	delete(h.removing, l.as)
	if l.drop {
		r.Dropped++
		delete(h.record, l.as)
		return
	}
	h.record[l.as] = ports.Managed{As: l.as, Withdrawn: true, Since: h.clock.Now()}
	h.seenWithdrawn[l.as] = h.clock.Now()
}

func countActive(leaving []*leaver) int {
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

// reset forgets every sample but n at now.
func (p *peaks) reset(now time.Time, n int) { p.samples = []sample{{at: now, n: n}} }
