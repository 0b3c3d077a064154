package domain

import (
	"sort"
	"time"

	"github.com/novox/postgres-provider/ports"
)

// The login check's budget. A backend that checks a password by logging in as the consumer
// (ports.LoginChecker) costs the server a backend and a key derivation for each: done at every
// verify pass, that is most of what the provider costs a server. So the loop grants logins on a
// budget of their own: each applied consumer is due one at least every LoginCheckEvery, the
// logins fall evenly over that interval (each consumer has its place in it, by the file's order,
// and is due at its next place: never more than the interval, less a pass, after its last; after
// a start, the consumers confirmed are not logged in at once but at their places), and never
// more than LoginRate are granted within any second, the earliest due first. Every
// other part of a check is still made every VerifyEvery. A consumer created, rotated or repaired
// is due its login check at the next verify pass, as every check was before the budget.

// Defaults of the login check's budget.
const (
	// DefaultLoginCheckEvery is how often each consumer's password is checked by a login at
	// least.
	DefaultLoginCheckEvery = time.Hour
	// DefaultLoginRate is the most logins granted within any second: at 10,000 consumers and
	// the default interval, 2.8 a second are due; the rest is room to catch up after a mass
	// create or a backlog.
	DefaultLoginRate = 10
)

// logins is what the budget remembers: the logins granted within the last second, and whether
// the last pass left some due ones waiting for room.
type logins struct {
	recent  []granted
	backlog bool
	listed  int // how many the file listed when logins were last granted
}

// granted is n logins granted at at.
type granted struct {
	at time.Time
	n  int
}

// room is how many logins may be granted at now without more than rate within any second.
func (l *logins) room(now time.Time, rate int) int {
	keep := l.recent[:0]
	n := 0
	for _, g := range l.recent {
		if d := now.Sub(g.at); d >= 0 && d < time.Second { // one ahead of now is a clock stepped back: gone
			keep = append(keep, g)
			n += g.n
		}
	}
	l.recent = keep
	return max(rate-n, 0)
}

// byLogin is whether the backend checks passwords by logging in, as it last said.
func (h *Harness) byLogin() bool {
	lc, ok := h.backend.(ports.LoginChecker)
	return ok && lc.ChecksByLogin()
}

// loginDue is whether the consumer of it is due its login check by now: the backend is used
// this pass even where it is not a verify pass (pending).
func (it *item) loginDue(now time.Time) bool {
	c := it.c
	return it.loginable(now) && (c.loginDue.IsZero() || !now.Before(c.loginDue))
}

// loginable is whether the consumer of it may have its login checked at now: its secret usable,
// applied as it asks now, and not braked.
func (it *item) loginable(now time.Time) bool {
	c := it.c
	return it.usable() && c.applied && c.hash == it.hash && !now.Before(c.lost.nextAt)
}

// grantLogins sets Provision.Login for the consumers whose login check this pass makes: every
// check, where the backend does not check by login; else those due (earliest due first, then in
// the file's order) as far as the budget has room, each made a check if it was not one.
func (h *Harness) grantLogins(items []*item) {
	byLogin := h.byLogin()
	for _, it := range items {
		it.p.Login = !byLogin && (it.act == check || it.act == confirm)
	}
	h.logins.backlog, h.logins.listed = false, len(items)
	if !byLogin {
		return
	}
	now := h.clock.Now()
	var due []*item
	for _, it := range items {
		c := it.c
		if !it.loginable(now) || it.act != check && it.act != nothing {
			continue
		}
		if c.loginDue.IsZero() { // after a start: the first ones spread over the interval
			c.loginDue = h.loginPlace(now, it.index, len(items))
		}
		if !now.Before(c.loginDue) {
			due = append(due, it)
		}
	}
	sort.SliceStable(due, func(i, j int) bool { return due[i].c.loginDue.Before(due[j].c.loginDue) })
	n := min(len(due), h.logins.room(now, h.cfg.LoginRate))
	for _, it := range due[:n] {
		it.p.Login = true
		if it.act == nothing {
			it.act = check
		}
	}
	if n > 0 {
		h.logins.recent = append(h.logins.recent, granted{at: now, n: n})
	}
	h.logins.backlog = n < len(due)
}

// span is how long after a login check the next is due: LoginCheckEvery less a pass (Every),
// since logins are made in passes, so that no password waits longer than LoginCheckEvery while
// the budget has room; never less than half of LoginCheckEvery.
func (h *Harness) span() time.Duration {
	return max(h.cfg.LoginCheckEvery-h.cfg.Every, h.cfg.LoginCheckEvery/2)
}

// loginPlace is when, after now, the index-th of n listed consumers is next due a login check: each
// has its place in every span (the consumers in the file's order, evenly apart), and is due at
// the next one, which is never more than span away. Logins made at their places fall evenly
// over the interval whenever the consumers were created or the loop started.
func (h *Harness) loginPlace(now time.Time, index, n int) time.Time {
	span := int64(h.span())
	at := int64(float64(span) * float64(index) / float64(max(n, 1)))
	t := now.UnixNano() - now.UnixNano()%span + at
	if t <= now.UnixNano() {
		t += span
	}
	return now.Add(time.Duration(t - now.UnixNano()))
}

// loggedIn records a check's answer to a login it was granted: the next is due at its place
// in the next span.
func (h *Harness) loggedIn(it *item) {
	if !it.p.Login {
		return
	}
	c, now := it.c, h.clock.Now()
	c.loginDue = h.loginPlace(now, it.index, h.logins.listed)
	h.statusOf(c).LoginCheckedAt = now
}

// loginAtNextVerify makes c, just created, rotated or repaired, due its login check at the next
// verify pass.
func (h *Harness) loginAtNextVerify(c *consumer) {
	c.loginDue = h.nextVerify()
}
