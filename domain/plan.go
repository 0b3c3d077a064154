package domain

import (
	"crypto/sha256"
	"sort"
	"time"

	"github.com/novox/postgres-provider/ports"
)

// action is what a pass asks of the backend for one consumer.
type action int

const (
	// nothing: unchanged and not due a check, or its secret cannot be used.
	nothing action = iota
	// create: new or changed.
	create
	// check: applied and due a check; applied again if not held.
	check
	// confirm: not applied by this process, but recorded as managed and active (made before
	// a restart, or by another replica): checked first, and created only if not held.
	confirm
	// withdraw: no longer listed; its login is taken away, its data kept.
	withdraw
	// drop: no longer listed, and withdrawn for DropAfter (or the drop policy without a
	// delay): everything it had is dropped.
	drop
)

// call is the backend call the action makes.
func (a action) call() string {
	switch a {
	case withdraw:
		return "remove"
	case drop:
		return "drop"
	}
	return "create"
}

// item is one consumer's part in a pass: listed (g is its entry) or leaving.
type item struct {
	c          *consumer
	g          *contribution // its entry in the file's last parse; nil where it is leaving
	hash       [sha256.Size]byte
	unreadable error  // its secret could not be read
	folder     string // the folder of secrets that cannot be entered, where that is why
	refused    error  // its secret cannot be a password

	index      int // its position in the file
	act        action
	continued  bool           // a check the last pass did not get an answer to
	asked      bool           // a check was made; its answer counts
	notAsked   bool           // a check was planned and not made (an earlier one timed out, or a stop)
	checked    *ports.Checked // a check's answer, in the batch's answers; nil until answered (answer)
	called     bool           // the backend was called for it: Create, Remove or Drop
	err        error          // Create's, Remove's or Drop's error
	did        ports.Act      // what Create said it did
	lacks      []string       // what Create said it lacks (an *ports.Incomplete, after the rest was done)
	brake      brake          // what the consumer's brake was when the pass began
	updates    []string       // the staged changes its create may make (stage)
	timedOut   bool
	granted    [parts]bool // the costly parts of a check this pass makes (budgets.go)
	skipInside bool        // a check that takes what is inside as last found (its inside not granted)
	said       string      // the failure said for it this pass (scrubbed): its status's last error

	// A leaving consumer's: active is whether its login still works.
	active bool
}

// provision is what the backend is asked for a listed consumer with a usable secret: its entry
// under the password read this pass, and what this pass lets its check and create do. It is
// made when asked for, not kept: 100,000 items would keep 11 MB of copies of their entries.
func (it *item) provision() ports.Provision {
	g := it.g
	return ports.Provision{As: g.As, Password: it.c.password, Values: g.Values(), Derived: g.Derived(), At: g.At, Node: g.Node,
		Login: it.granted[login], SkipInside: it.skipInside, Updates: it.updates}
}

// unanswered is what answer reads of an item whose check was not answered. Never written.
var unanswered ports.Checked

// answer is its check's answer, the zero value where none was: an answer (144 bytes) is kept by
// the items checked, not by each of 100,000 items every pass.
func (it *item) answer() *ports.Checked {
	if it.checked == nil {
		return &unanswered
	}
	return it.checked
}

// usable is whether its secret could be read and can be a password.
func (it *item) usable() bool { return it.unreadable == nil && it.refused == nil }

// plan decides what to ask of the backend for each listed consumer.
func (h *Harness) plan(items []*item, verifying bool) {
	now := h.clock.Now()
	for _, it := range items {
		c := it.c
		if !it.usable() {
			c.isUnasked, c.unasked = false, 0
			continue
		}
		it.brake = c.lost
		if c.refusal != nil && c.refusal.hash != it.hash {
			c.refusal = nil // what it asks for changed: tried at once
		}
		switch {
		case c.applied && c.hash == it.hash:
			c.entry = *it.g // the same entry, as the file's last parse has it: the old parse is let go
			if (verifying || c.isUnasked) && !now.Before(c.lost.nextAt) {
				it.act, it.continued = check, !verifying
			}
		case c.refusal != nil && now.Before(c.refusal.nextAt):
			// Refused, or asking for what cannot be made: not asked again before its wait is over.
		case !c.applied && c.recorded && !c.record.Withdrawn:
			it.act = confirm
		default:
			it.act = create
		}
		if it.act != check && it.act != confirm {
			c.isUnasked, c.unasked = false, 0 // braked, changed or backing off: no longer a check to continue
		}
	}
}

// planLeaving is every consumer the file no longer lists that is to be withdrawn or dropped:
// what this process applied, and what the backend's record says is managed, whoever applied
// it. With the drop policy, a consumer withdrawn for DropAfter is dropped. By login.
func (h *Harness) planLeaving() []*item {
	now := h.clock.Now()
	if h.noneLeaving == h.consumers.changes && now.Before(h.nextDrop) {
		return nil // nothing listed, applied or recorded changed since nobody was leaving
	}
	h.nextDrop = now.Add(maxBackoff)
	dropAtOnce := h.cfg.OnWithdraw == Drop && h.cfg.DropAfter == 0
	var out []*item
	for _, c := range h.consumers.by {
		if c.listed {
			continue
		}
		switch {
		case c.managed():
			it := &item{c: c, act: withdraw, active: true}
			if dropAtOnce && !now.Before(c.left().retryDrop) { // else withdrawn while its drop waits out a failed archive
				it.act = drop
			}
			out = append(out, it)
		case !c.recorded || h.cfg.OnWithdraw != Drop || c.record.Since.IsZero():
		default:
			h.seeWithdrawn(c)
			due := dropDue(c, h.cfg.DropAfter, now)
			if retry := c.left().retryDrop; retry.After(due) {
				due = retry // its archive failed: tried again after a back-off
			}
			switch {
			case !now.Before(due):
				out = append(out, &item{c: c, act: drop})
			case due.Before(h.nextDrop):
				h.nextDrop = due
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].c.as < out[j].c.as })
	h.noneLeaving = -1
	if len(out) == 0 {
		h.noneLeaving = h.consumers.changes
	}
	return out
}

// seeWithdrawn notes when this process first saw c withdrawn, which its drop waits from.
func (h *Harness) seeWithdrawn(c *consumer) {
	if c.left().seenWithdrawn.IsZero() {
		c.leave().seenWithdrawn = h.clock.Now()
	}
}

// dropDue is when a withdrawn consumer is dropped: DropAfter from the later of what its
// record says and when this process first saw it withdrawn (seeWithdrawn). A record is not
// trusted to shorten the delay: anyone allowed to write it could date it back. Not seen yet,
// it counts as seen now. Compared with the clock's Now (Before), the process's own clock
// decides where it saw the withdrawal itself: a wall clock stepped forward drops nothing early.
func dropDue(c *consumer, after time.Duration, now time.Time) time.Time {
	from := c.left().seenWithdrawn
	if from.IsZero() {
		from = now
	}
	if c.record.Since.After(from) {
		from = c.record.Since
	}
	return from.Add(after)
}

// withdrawnFor is how long c has been withdrawn, as said and shown: by its record's time, or,
// where that is later (a wall clock stepped back, a record dated ahead), since this process
// first saw it withdrawn; never negative. Where c is dropped (dropDue passed), it is at least
// DropAfter, by the same clock that decided.
func withdrawnFor(c *consumer, now time.Time) time.Duration {
	d := max(now.Sub(c.record.Since), 0)
	if seen := c.left().seenWithdrawn; !seen.IsZero() {
		d = max(d, now.Sub(seen))
	}
	return d
}

// at is due as a time to show: now and what is left until due by the clock that decides it,
// never before now. A due time counted on the process's own clock keeps the wall time of when
// it was counted from; after a step of the wall clock it would show a time already past (or far
// off) for what the daemon will do when its own clock says.
func at(due, now time.Time) time.Time { return now.Add(max(due.Sub(now), 0)) }
