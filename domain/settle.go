package domain

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/novox/postgres-provider/ports"
)

// settle walks the listed consumers in the file's order and records and says what the run
// found.
func (h *Harness) settle(items []*item, r *Report) {
	shared := h.sharedCauses(items)
	for _, it := range items {
		c := it.c
		switch {
		case h.settleSecret(it):
		case it.act == nothing: // unchanged and not due a check, or backing off: shown as it stands
		case it.act == create:
			h.settleCreate(it, 0, r)
		case !it.asked:
			// Not asked (an earlier check timed out, or a stop): unchecked, and asked next pass.
			if it.notAsked {
				r.Unchecked++
			}
		case it.answer().Err != nil && ports.IsRefusal(it.answer().Err):
			// Its entry asks for what the backend will not make (a setting taken off the allowed
			// list since it was made): a refusal, not trouble with the server. What was made for
			// it is left as it is; its next check asks again.
			r.Failures++
			it.said = h.scrubbed(c, it.answer().Err)
			c.uncheckable = nil
			if c.refusal == nil || c.refusal.hash != it.hash {
				c.refusal = &refusal{hash: it.hash}
			}
			if s := shared[refusedCause(it.answer().Err)]; s != nil {
				h.sayShared(s)
				tally(&c.failing, it.said)
			} else if tally(&c.failing, it.said) {
				h.say(slog.LevelWarn, c.as, "%s: refused: %s; what was made for it is left as it is", c.as, it.said)
			}
		case it.answer().Err != nil:
			// Unable to ask is not evidence of loss.
			r.Unchecked++
			r.CheckErrors++
			it.said = h.scrubbed(c, it.answer().Err)
			if s := shared[causeOf(it.answer().Err)]; s != nil {
				h.sayShared(s)
			} else if tally(&c.uncheckable, it.said) {
				h.say(slog.LevelWarn, c.as, "%s: could not check the backend%s: %s", c.as, h.retrying(", will ask again"), it.said)
			}
		default:
			c.uncheckable = nil
			if c.refusal != nil { // a check refused before is answered now: the refusal is over
				c.refusal, c.failing = nil, nil
			}
			h.settleCheck(it, r)
		}
		h.show(it)
	}
	r.Consumers, r.Status = h.views(items)
}

// settleCheck records a check's answer: held releases the brake; not held was applied again.
func (h *Harness) settleCheck(it *item, r *Report) {
	c := it.c
	st := h.editStatus(c)
	st.CheckedAt, h.consumers.dirty = h.clock.Now(), true
	c.lacks = it.answer().Lacks
	h.answered(it)
	it.err = h.settleUpdates(it)
	if it.answer().Held {
		st.Drift = nil
		c.lost = brake{}
		if it.act == confirm {
			h.consumers.markApplied(c, it.hash, *it.g, false)
		}
		if it.called && it.err != nil { // held, and a staged change's create failed otherwise
			r.Failures++
			it.said = h.createFailed(c, it.err)
		}
		return
	}
	st.Drift = it.answer().Drift
	if !it.called {
		return // not held, and not applied again: the pass was stopped first
	}
	if it.act == confirm && it.brake.times == 0 {
		// Made before this process started (or by another replica), and not as asked now: a
		// create like any other. One whose re-apply was refused (markUnapplied) is still lost:
		// counted on below, as the spec's loop counts across failed re-applies.
		h.settleCreate(it, 0, r)
		return
	}
	reapplying := it.brake.times + 1
	if reapplying == 1 {
		h.say(slog.LevelWarn, c.as, "%s: the backend no longer holds it; applying again", c.as)
	} else {
		what := "what was applied"
		if len(it.answer().Drift) > 0 {
			what = strings.Join(it.answer().Drift, ", ")
		}
		h.say(slog.LevelWarn, c.as, "%s: %s changed back after being applied (%d times in a row); applying again", c.as, what, reapplying)
	}
	if len(it.answer().Drift) > 0 {
		h.say(slog.LevelWarn, c.as, "%s: what drifted: %s", c.as, strings.Join(it.answer().Drift, ", "))
	}
	h.settleCreate(it, reapplying, r)
}

// settleCreate records a create, of a new or changed consumer (reapplying 0) or of one the
// backend lost for the reapplying-th time in a row.
func (h *Harness) settleCreate(it *item, reapplying int, r *Report) {
	c := it.c
	if !it.called {
		return // the pass was stopped before it: left as it was, for the next start
	}
	if it.err != nil {
		r.Failures++
		refused := ports.IsRefusal(it.err)
		if refused {
			h.backOff(it)
		}
		it.said = h.createFailed(c, it.err)
		switch {
		case reapplying > 0 && !refused:
			// The brake keeps its count: the next check may apply again at once.
			c.lost = brake{times: reapplying - 1}
		case refused:
			// Lost and not the provider's to make again (its role renamed away, its database
			// another's): no longer applied, so that it waits as any refused create does, rather
			// than being checked, found lost and applied again at every verify pass.
			if reapplying > 0 {
				h.consumers.markUnapplied(c)
				c.lost = brake{times: reapplying - 1} // the count of re-applies in a row goes on
			}
		default:
			c.refusal = nil // transient: tried again next pass
		}
		return
	}
	c.refusal, c.lacks = nil, it.lacks
	if c.failing != nil {
		h.say(slog.LevelInfo, c.as, "%s: created, after %d failed attempt(s)", c.as, c.failing.times)
		c.failing = nil
	}
	h.audit(h.eventOf(it, reapplying))
	h.consumers.markApplied(c, it.hash, *it.g, true)
	h.dueAtNextVerify(c)
	if reapplying == 0 {
		r.Created++
		c.lost = brake{}
		return
	}
	r.Reapplied++
	wait := backoff(h.cfg.VerifyEvery, reapplying)
	c.lost = brake{times: reapplying, nextAt: h.clock.Now().Add(wait)}
	if reapplying > 1 {
		h.say(slog.LevelWarn, c.as, "%s: next check in %s", c.as, wait.Round(time.Second))
	}
}

// eventOf is what a create that succeeded did, for the audit trail, and its line: said before
// the store takes the create in, since it tells from what the loop knew before.
func (h *Harness) eventOf(it *item, reapplying int) (c *consumer, event, line string) {
	c = it.c
	switch {
	case reapplying > 0 || it.act == confirm:
		if len(it.answer().Drift) > 0 {
			return c, "repaired", fmt.Sprintf("%s: repaired (%s)", c.as, strings.Join(it.answer().Drift, ", "))
		}
		return c, "repaired", c.as + ": repaired"
	case it.did == ports.ActAdopt:
		return c, "adopted", c.as + ": adopted"
	case c.applied && c.entry.shape == it.g.shape:
		return c, "password rotated", c.as + ": password rotated"
	case c.applied:
		line = c.as + ": updated to what its entry now asks for"
		if changed := entryChanges(c.entry, *it.g); len(changed) > 0 {
			line += " (" + h.scrubbed(c, errors.New(strings.Join(changed, "; "))) + ")"
		}
		return c, "updated", line
	case c.recorded && c.record.Withdrawn:
		return c, "reinstated", c.as + ": reinstated (its login given back)"
	case c.recorded:
		return c, "repaired", c.as + ": repaired"
	}
	return c, "created", c.as + ": created"
}

// createFailed says a failed create the first time, and while it fails the same way, every
// loudlyEvery-th time; a different error starts the count again. A refusal is said as one,
// with when it is tried again (backOff, called first). It answers the error's text.
func (h *Harness) createFailed(c *consumer, err error) string {
	text := h.scrubbed(c, err)
	if !tally(&c.failing, text) {
		return text
	}
	if c.refusal == nil || !ports.IsRefusal(err) {
		h.say(slog.LevelWarn, c.as, "%s: create failed%s: %s", c.as, h.retrying(", will retry"), text)
		return text
	}
	wait := max(c.refusal.nextAt.Sub(h.clock.Now()), 0).Round(time.Second)
	h.say(slog.LevelWarn, c.as, "%s: refused: %s%s", c.as, text,
		h.retrying(fmt.Sprintf("; tried again in %s, or at once when its entry changes or on SIGHUP", wait)))
	return text
}

// backOff spaces out the creates of a consumer that was refused, or asks for what cannot be
// made: the next try of a refused one waits Every, doubled per refusal in a row, at most
// maxRefusedWait; of an invalid one, invalidWait. Its line is said once (createFailed), then
// every loudlyEvery-th time.
func (h *Harness) backOff(it *item) {
	b := it.c.refusal
	if b == nil || b.hash != it.hash {
		b = &refusal{hash: it.hash}
		it.c.refusal = b
	}
	b.times++
	b.nextAt = h.clock.Now().Add(refusedWait(h.cfg.Every, b.times, errors.Is(it.err, ports.ErrInvalid)))
}

// settleUnchecked records a pass in which the backend could not be used: consumers it would
// have been asked about are unchecked; those whose secrets cannot be used are said as always.
func (h *Harness) settleUnchecked(items []*item, r *Report) {
	for _, it := range items {
		if !h.settleSecret(it) {
			r.Unchecked++
			it.said = r.ServerProblem
		}
		h.show(it)
	}
	r.Consumers, r.Status = h.views(items)
}

// settleSecret records and says a consumer whose secret cannot be used, and reports whether
// that was so.
func (h *Harness) settleSecret(it *item) bool {
	switch {
	case it.unreadable != nil && h.folders[it.folder] != nil:
		h.folderUnreadable(h.folders[it.folder])
		it.c.waiting = 0 // patient again once the folder can be entered
	case it.unreadable != nil:
		h.secretUnreadable(it.c, *it.g, it.unreadable)
	case it.refused != nil:
		it.said = h.secretRefused(it.c, *it.g, it.refused)
	default:
		return false
	}
	return true
}

// settleLeaving records and says each withdrawal and drop: failures the first time and every
// loudlyEvery-th, and tried again next pass.
func (h *Harness) settleLeaving(leaving []*item, r *Report) {
	for _, it := range leaving {
		c := it.c
		if !it.called {
			continue // a stop came first
		}
		if held := (*ports.DropHeld)(nil); errors.As(it.err, &held) {
			h.dropHeld(c, held, r)
			continue
		}
		if c.leaving != nil {
			c.leaving.held, c.leaving.heldFails = nil, 0
		}
		if it.err != nil {
			r.Failures++
			verb := "remove"
			if !it.active {
				verb = "drop"
			}
			text := h.scrubbed(c, it.err)
			if c.removing.tally(text) {
				h.say(slog.LevelWarn, c.as, "%s: %s failed%s: %s", c.as, verb, h.retrying(", will retry"), text)
			}
			continue
		}
		if it.active {
			r.Withdrawn++
		}
		if it.act == drop {
			r.Dropped++
			h.audit(c, "dropped", c.as+": dropped: its login and data are gone")
			h.consumers.forget(c)
			h.forgetSaid(c.as)
			continue
		}
		h.audit(c, "withdrawn", c.as+": withdrawn: its login taken away, its data kept")
		h.consumers.markWithdrawn(c, h.clock.Now())
		h.forgetSaid(c.as)
	}
}

// dropHeld records and says a drop the backend holds back: an archive under way is said once,
// and the drop called again next pass; a failed one is said as the drop's failure and tried
// again after a back-off that doubles from dropRetryFirst to maxBackoff.
func (h *Harness) dropHeld(c *consumer, held *ports.DropHeld, r *Report) {
	l := c.leave()
	l.held = held
	if !held.Failed {
		if c.removing.tally(held.Error()) {
			h.say(slog.LevelInfo, c.as, "%s: %s", c.as, h.scrubbed(c, held))
		}
		return
	}
	r.Failures++
	wait := min(dropRetryFirst<<min(l.heldFails, 10), maxBackoff)
	l.heldFails++
	l.retryDrop = h.clock.Now().Add(wait)
	if c.removing.tally(held.Error()) {
		h.say(slog.LevelWarn, c.as, "%s: %s%s", c.as, h.scrubbed(c, held), h.retrying(fmt.Sprintf("; tried again in %s", wait)))
	}
}

// dropRetryFirst is the first wait before a drop whose archive failed is tried again.
const dropRetryFirst = time.Minute

// tally counts text once more in *r, made at the first, and reports whether this time is one
// to say: a consumer's repeats are nil until something fails.
func tally(r **repeat, text string) (say bool) {
	if *r == nil {
		*r = &repeat{}
	}
	return (*r).tally(text)
}
