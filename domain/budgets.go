package domain

import (
	"sort"
	"time"

	"github.com/novox/postgres-provider/ports"
)

// Budgets of the costly parts of a check. Two parts of a check cost the server far more than the
// rest, which reads the shared catalogs for all consumers in one round trip:
//   - a login, where the backend checks a password by logging in as the consumer
//     (ports.LoginChecker): a backend and a key derivation each;
//   - a look inside what the backend made for the consumer (its database: the extensions
//     there, their versions), a connection to each.
//
// Done at every verify pass, they would be most of what the provider costs a server. So the
// loop grants each on a budget of its own: each applied consumer is due one at least every
// interval, they fall evenly over that interval (each consumer has its place in it, by the
// file's order, and is due at its next place: never more than the interval, less a pass,
// after its last; after a start, the consumers confirmed are not asked at once but at their
// places), and never more than the budget's rate are granted within any second, the earliest
// due first. Every other part of a check is still made every VerifyEvery. A consumer created,
// rotated or repaired is due both at the next verify pass, as every check was before the
// budgets; SIGHUP makes every look inside due at once.

// Defaults of the budgets.
const (
	// DefaultLoginCheckEvery is how often each consumer's password is checked by a login at
	// least.
	DefaultLoginCheckEvery = time.Hour
	// DefaultLoginRate is the most logins granted within any second: at 10,000 consumers and
	// the default interval, 2.8 a second are due; the rest is room to catch up after a mass
	// create or a backlog.
	DefaultLoginRate = 10
	// DefaultInsideCheckEvery is how often at least what is inside each consumer's database is
	// looked at, where the daemon is not told otherwise (Config.InsideCheckEvery's zero looks
	// at every check). An hour: at 10,000 consumers, 2.8 connections a second; and what the
	// provider made inside (the extensions it owns) only a superuser can change.
	DefaultInsideCheckEvery = time.Hour
	// DefaultInsideRate is the most looks inside granted within any second, as DefaultLoginRate.
	DefaultInsideRate = 10
)

// part is a costly part of a check, granted on a budget.
type part int

const (
	login  part = iota // the password checked by logging in
	inside             // what is inside the consumer's database looked at
	parts
)

// budget is what the loop remembers of one part's budget: its interval and rate, the grants
// within the last second, and whether the last pass left some due ones waiting for room.
type budget struct {
	every   time.Duration
	rate    int
	recent  []granted
	backlog bool
	listed  int // how many the file listed when it last granted
}

// granted is n grants made at at.
type granted struct {
	at time.Time
	n  int
}

// room is how many may be granted at now without more than rate within any second.
func (b *budget) room(now time.Time) int {
	keep := b.recent[:0]
	n := 0
	for _, g := range b.recent {
		if d := now.Sub(g.at); d >= 0 && d < time.Second { // one ahead of now is a clock stepped back: gone
			keep = append(keep, g)
			n += g.n
		}
	}
	b.recent = keep
	return max(b.rate-n, 0)
}

// span is how long after a grant the next is due: the interval less a pass (every, the time
// between passes), since grants are made in passes, so that none waits longer than the
// interval while the budget has room; never less than half of the interval.
func (b *budget) span(every time.Duration) time.Duration {
	return max(b.every-every, b.every/2)
}

// place is when, after now, the index-th of n listed consumers is next due: each has its place
// in every span (the consumers in the file's order, evenly apart), and is due at the next one,
// which is never more than span away. Grants made at their places fall evenly over the
// interval whenever the consumers were created or the loop started.
func place(now time.Time, span time.Duration, index, n int) time.Time {
	s := int64(span)
	at := int64(float64(s) * float64(index) / float64(max(n, 1)))
	t := now.UnixNano() - now.UnixNano()%s + at
	if t <= now.UnixNano() {
		t += s
	}
	return now.Add(time.Duration(t - now.UnixNano()))
}

// budgeted is whether part is granted on its budget, as the backend last said and the loop is
// set: logins where the backend checks passwords by logging in; looks inside where the loop
// runs on (not Once) and the interval is longer than VerifyEvery.
func (h *Harness) budgeted(p part) bool {
	switch p {
	case login:
		lc, ok := h.backend.(ports.LoginChecker)
		return ok && lc.ChecksByLogin()
	default:
		return !h.cfg.Once && h.budgets[inside].every > h.cfg.VerifyEvery
	}
}

// due is whether the consumer of it is due part by now: the backend is used this pass even
// where it is not a verify pass (pending).
func (it *item) due(p part, now time.Time) bool {
	c := it.c
	return it.grantable(now) && (c.due[p].IsZero() || !now.Before(c.due[p]))
}

// grantable is whether the consumer of it may be granted a costly part at now: its secret
// usable, applied as it asks now, and not braked.
func (it *item) grantable(now time.Time) bool {
	c := it.c
	return it.usable() && c.applied && c.hash == it.hash && !now.Before(c.lost.nextAt)
}

// grant sets, for each part, which of items' checks this pass makes it (item.granted, and the
// Provision's Login and SkipInside): every check, where the part is not on a budget; else those
// due (earliest due first, then in the file's order) as far as the budget has room, each made a
// check if it was not one.
func (h *Harness) grant(items []*item) {
	var budgeted [parts]bool
	for p := range parts {
		budgeted[p] = h.budgeted(p)
		h.budgets[p].backlog, h.budgets[p].listed = false, len(items)
		if budgeted[p] { // items are made afresh each pass (readSecrets): none granted yet
			h.grantDue(p, items)
		}
	}
	for _, it := range items {
		checks := it.act == check || it.act == confirm
		for p := range parts {
			it.granted[p] = checks && (!budgeted[p] || it.granted[p])
		}
		it.skipInside = checks && !it.granted[inside]
	}
}

// grantDue grants part p to the consumers of items due it, as far as its budget has room.
func (h *Harness) grantDue(p part, items []*item) {
	b := &h.budgets[p]
	now := h.clock.Now()
	span := b.span(h.cfg.Every)
	var due []*item
	for _, it := range items {
		c := it.c
		if !it.grantable(now) || it.act != check && it.act != nothing {
			continue
		}
		if c.due[p].IsZero() { // after a start: the first ones spread over the interval
			c.due[p] = place(now, span, it.index, len(items))
		}
		if !now.Before(c.due[p]) {
			due = append(due, it)
		}
	}
	sort.SliceStable(due, func(i, j int) bool { return due[i].c.due[p].Before(due[j].c.due[p]) })
	n := min(len(due), b.room(now))
	for _, it := range due[:n] {
		it.granted[p] = true
		if it.act == nothing {
			it.act = check
		}
	}
	if n > 0 {
		b.recent = append(b.recent, granted{at: now, n: n})
	}
	b.backlog = n < len(due)
}

// answered records a check's answer to the parts it was granted: each next due at its place
// in the next span, and /status told when.
func (h *Harness) answered(it *item) {
	c, now := it.c, h.clock.Now()
	for p := range parts {
		if !it.granted[p] {
			continue
		}
		if span := h.budgets[p].span(h.cfg.Every); span > 0 { // a part never on a budget has no places
			c.due[p] = place(now, span, it.index, h.budgets[p].listed)
		}
		st := h.editStatus(c)
		if p == login {
			st.LoginCheckedAt = now
		} else {
			st.InsideCheckedAt = now
		}
	}
}

// dueAtNextVerify makes c, just created, rotated or repaired, due every part at the next verify
// pass.
func (h *Harness) dueAtNextVerify(c *consumer) {
	for p := range parts {
		c.due[p] = h.nextVerify()
	}
}

// lookInsideNow makes every consumer due its look inside at once (SIGHUP).
func (h *Harness) lookInsideNow() {
	now := h.clock.Now()
	for _, c := range h.consumers.by {
		c.due[inside] = now
	}
}

// backlog is whether a budget left due grants waiting for room.
func (h *Harness) backlog() bool {
	for p := range parts {
		if h.budgets[p].backlog {
			return true
		}
	}
	return false
}
