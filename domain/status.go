package domain

import (
	"slices"
	"sort"
	"time"
)

// stateOf is where a listed consumer stands after a pass, derived from what the loop knows of
// it rather than set along each way a pass can go: its secret as this pass read it, a create
// that keeps failing, whether this process applied it, and its brake.
func stateOf(it *item) State {
	c := it.c
	switch {
	case it.unreadable != nil:
		return StateWaitingForSecret
	case it.refused != nil:
		return StateFailing
	case c.failing != nil && c.refusal != nil:
		return StateRefused // a refusal, said as one: never as a failure retried every pass
	case c.failing != nil:
		return StateFailing
	case !c.applied:
		return StateUnchecked // not yet applied by this process, nor failing: nothing known yet
	case len(c.lacks) > 0:
		return StateIncomplete // never shown as applied, whatever else it is
	case c.lost.times > 0:
		return StateBraked
	}
	return StateApplied
}

func (h *Harness) statusOf(c *consumer) *Status {
	if c.status == nil {
		c.status, c.statusAt = &Status{As: c.as}, h.published
	}
	return c.status
}

// editStatus is c's status to change: a copy of it where the one it has was handed out in a
// Report's views since it was made, which no change may reach.
func (h *Harness) editStatus(c *consumer) *Status {
	st := h.statusOf(c)
	if c.statusAt != h.published {
		copied := *st
		c.status, c.statusAt = &copied, h.published
	}
	return c.status
}

// show records, once a pass has settled a listed consumer, where it stands (stateOf), since
// when, its last error and its next check. The failure said for it this pass (it.said) is its
// last error; one said before is kept until it is applied or braked again.
func (h *Harness) show(it *item) {
	c, s := it.c, stateOf(it)
	was := h.statusOf(c)
	now := *was
	if now.State != s || now.Since.IsZero() {
		now.State, now.Since = s, h.clock.Now()
	}
	if it.said != "" || s == StateApplied || s == StateBraked {
		now.LastError = it.said
	}
	now.Lacks = c.lacks
	now.NextCheck = time.Time{}
	if c.applied {
		now.NextCheck = h.nextVerify()
		if c.lost.nextAt.After(now.NextCheck) {
			now.NextCheck = c.lost.nextAt
		}
	}
	if now.State != was.State || now.Since != was.Since || now.LastError != was.LastError || now.NextCheck != was.NextCheck ||
		!slices.Equal(now.Lacks, was.Lacks) {
		*h.editStatus(c), h.consumers.dirty = now, true
	}
}

// views are the listed consumers' states and statuses for a Report, made anew only where some
// changed: a Report's maps and slices are never changed once handed out.
func (h *Harness) views(items []*item) (map[string]State, []*Status) {
	if !h.consumers.dirty && len(h.viewStatus) == len(items) {
		return h.viewStates, h.viewStatus
	}
	states := make(map[string]State, len(items))
	status := make([]*Status, len(items))
	for i, it := range items {
		st := h.statusOf(it.c)
		states[it.c.as], status[i] = st.State, st
	}
	h.published++ // each status handed out from here on is changed in a copy
	h.viewStates, h.viewStatus, h.consumers.dirty = states, status, false
	return states, status
}

// leavingViews is what the loop knows of each consumer the file no longer lists that the
// backend still holds something of, by login. Nothing while the file has not been read: who
// is listed is not known.
func (h *Harness) leavingViews() []Leaving {
	if h.watched == nil {
		return nil
	}
	var out []Leaving
	now := h.clock.Now()
	for _, c := range h.consumers.by {
		if c.listed || !c.managed() && !c.recorded {
			continue
		}
		l := Leaving{As: c.as}
		switch {
		case c.left().held != nil && !c.left().held.Failed:
			l.State, l.LastError = LeavingArchiving, Scrub(c.left().held.Error(), c.password)
		case c.removing != nil && c.removing.times > 0:
			l.State, l.LastError = LeavingFailing, c.removing.text
		case c.managed() && h.mass:
			l.State = LeavingHeld
		case c.managed():
			l.State = LeavingWaiting
		default:
			l.State = LeavingWithdrawn
			if !c.record.Since.IsZero() {
				l.Since = now.Add(-withdrawnFor(c, now))
			}
		}
		if c.managed() && h.file.bad == 0 {
			l.WithdrawAt = h.withdrawalDue(h.mass)
		}
		if h.cfg.OnWithdraw == Drop {
			switch {
			case !c.managed() && !c.record.Since.IsZero():
				l.DropAt = at(dropDue(c, h.cfg.DropAfter, now), now)
			case c.managed() && !l.WithdrawAt.IsZero():
				l.DropAt = l.WithdrawAt.Add(h.cfg.DropAfter)
			}
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].As < out[j].As })
	return out
}

// nextVerify is when the next verify pass is due.
func (h *Harness) nextVerify() time.Time { return h.verifiedAt.Add(h.cfg.VerifyEvery) }
