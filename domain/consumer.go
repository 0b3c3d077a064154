package domain

import (
	"crypto/sha256"
	"time"

	"github.com/novox/postgres-provider/ports"
)

// consumer is everything the loop knows of one login: listed in the file, applied by this
// process, in the backend's record, or on its way out. What it knows of the backend is a cache
// of what the backend said.
type consumer struct {
	as string

	// listed is whether the file lists it now; applied whether this process applied it (or
	// confirmed it held), as hash asks; recorded whether record holds the backend's record of
	// it; isUnasked whether its check was left unanswered (unasked). Side by side, the four
	// take one word: 100,000 consumers are kept.
	listed, applied, recorded, isUnasked bool

	hash [sha256.Size]byte
	// entry is what it asked for when applied (its values and derived), to say what a change
	// of its entry changed; the same strings as the file's last parse where its shape is the same.
	entry  contribution
	record ports.Managed

	// Its secret: password (known to the scrub), memo (as last read), waiting (passes it
	// could not be read in a row), refusedSecret (what was said of a secret that cannot be a
	// password).
	password      string
	memo          secretMemo
	waiting       int
	refusedSecret *repeat

	// What its creates and checks met: lost (the brake), failing (a create that fails),
	// refusal (the wait of a create refused or invalid), unasked (a check left unanswered,
	// with its own timeouts this verify round), uncheckable (the check error last said).
	lost        brake
	failing     *repeat
	refusal     *refusal
	unasked     int
	uncheckable *repeat
	// due is when each costly part of its check is next due (budgets.go); zero until first
	// scheduled.
	due [parts]time.Time
	// lacks is what its last create or check said it lacks (ports.Holding.Lacks).
	lacks []string
	// removing is its withdrawal or drop under way: said once, and its failures.
	removing *repeat
	// leaving is what its withdrawal and drop keep, nil where it never left (left reads it).
	leaving *leaving

	// status is what the Report says of it while it is listed; statusAt is the count of views
	// handed out when it was made (editStatus).
	status   *Status
	statusAt uint64
}

// leaving is what the loop keeps of a consumer's withdrawal and drop, apart: most consumers
// never leave, and each of 100,000 listed is kept.
type leaving struct {
	// seenWithdrawn is when this process first saw it withdrawn: its drop waits DropAfter from
	// no earlier than that.
	seenWithdrawn time.Time
	// waitSaid is the file's change its withdrawal's wait was said for (sayWaiting).
	waitSaid time.Time
	// held is what holds its drop back (ports.DropHeld), and heldFails how many times in a
	// row its archive failed; retryDrop is when a failed one is tried again.
	held      *ports.DropHeld
	heldFails int
	retryDrop time.Time
}

// notLeft is what left reads of a consumer that never left. Never written.
var notLeft leaving

// left is what c's withdrawal and drop keep, to read: the zero value where it never left.
func (c *consumer) left() *leaving {
	if c.leaving == nil {
		return &notLeft
	}
	return c.leaving
}

// leave is what c's withdrawal and drop keep, to write: made at its first.
func (c *consumer) leave() *leaving {
	if c.leaving == nil {
		c.leaving = &leaving{}
	}
	return c.leaving
}

// managed is whether it counts as one the provider manages: applied, or recorded and active.
func (c *consumer) managed() bool { return c.applied || c.recorded && !c.record.Withdrawn }

// unlisted forgets what the loop counted for a consumer the file no longer lists. What was
// applied or recorded stays until it is withdrawn; so does its password, to scrub it.
func (c *consumer) unlisted() {
	c.listed = false
	c.memo, c.waiting, c.refusedSecret = secretMemo{}, 0, nil
	c.failing, c.refusal, c.unasked, c.isUnasked, c.uncheckable, c.lacks = nil, nil, 0, false, nil, nil
	c.status = nil
}

// store is the loop's consumers, by login, and what a change to them invalidates.
type store struct {
	by map[string]*consumer
	// secrets indexes every password known, to scrub them in linear time.
	secrets secretIndex
	// changes counts changes to what is listed, applied or recorded: what decides who is
	// leaving. dirty is a change to a listed consumer's status: the Report's views are made
	// anew.
	changes int
	dirty   bool
}

func newStore() store { return store{by: map[string]*consumer{}, changes: 1, dirty: true} }

// add makes the consumer as where the loop knew nothing of it, and answers it either way.
func (s *store) add(as string) *consumer {
	c := s.by[as]
	if c == nil {
		c = &consumer{as: as}
		s.by[as] = c
	}
	return c
}

// get is the consumer as, nil if the loop knows nothing of it.
func (s *store) get(as string) *consumer { return s.by[as] }

// forget drops all the loop knows of c.
func (s *store) forget(c *consumer) {
	s.setPassword(c, "")
	delete(s.by, c.as)
	s.changes++
}

// forgetIfIdle forgets c where nothing of it is listed, applied or recorded.
func (s *store) forgetIfIdle(c *consumer) {
	if !c.listed && !c.applied && !c.recorded && c.removing == nil {
		s.forget(c)
	}
}

// list marks who the file lists now; those it stopped listing are unlisted, and forgotten
// where nothing of them is applied or recorded.
func (s *store) list(given []contribution) {
	listed := make(map[string]bool, len(given))
	for _, g := range given {
		s.add(g.As).listed = true
		listed[g.As] = true
	}
	for as, c := range s.by {
		if c.listed && !listed[as] {
			c.unlisted()
			if !c.applied {
				s.setPassword(c, "")
			}
			s.forgetIfIdle(c)
		}
	}
	s.changes++
	s.dirty = true
}

// markApplied marks c applied as hash (and shape, without the password) asks, and, where made,
// recorded and active.
func (s *store) markApplied(c *consumer, hash [sha256.Size]byte, g contribution, made bool) {
	c.applied, c.hash, c.entry = true, hash, g
	if made {
		c.record, c.recorded = ports.Managed{As: c.as}, true
		c.removing = nil
	}
	s.changes++
}

// markUnapplied marks c no longer applied by this process: what it applied was lost and may not
// be made again. Its record, where the backend still has one, is what it manages. Its brake
// keeps the count of re-applies in a row, as for any failed re-apply: the next check that finds
// it lost (a confirm) goes on counting.
func (s *store) markUnapplied(c *consumer) {
	c.applied = false
	s.changes++
}

// markWithdrawn marks c withdrawn at now: its login gone, its data kept, its password forgotten
// with its login.
func (s *store) markWithdrawn(c *consumer, now time.Time) {
	c.applied, c.lost, c.removing = false, brake{}, nil
	c.record, c.recorded = ports.Managed{As: c.as, Withdrawn: true, Since: now}, true
	c.leave().seenWithdrawn = now
	s.setPassword(c, "")
	s.changes++
}

// recordIs takes the backend's record as what it manages now.
func (s *store) recordIs(managed []ports.Managed) {
	inRecord := make(map[string]bool, len(managed))
	for _, m := range managed {
		c := s.add(m.As)
		if !m.Withdrawn && c.leaving != nil {
			c.leaving.seenWithdrawn = time.Time{} // back: a later withdrawal counts afresh
		}
		c.record, c.recorded = m, true
		inRecord[m.As] = true
	}
	for as, c := range s.by {
		if !inRecord[as] && c.recorded {
			c.record, c.recorded = ports.Managed{}, false
			if c.leaving != nil {
				c.leaving.seenWithdrawn = time.Time{}
			}
			s.forgetIfIdle(c)
		}
	}
	s.changes++
}

// setPassword remembers c's password, to scrub it from what is said; "" forgets it.
func (s *store) setPassword(c *consumer, pw string) {
	if c.password == pw {
		return
	}
	if c.password != "" {
		s.secrets.remove(c.password)
	}
	c.password = pw
	if pw != "" {
		s.secrets.add(pw)
	}
}

// count is how many consumers the provider manages, as far as the loop knows.
func (s *store) count() int {
	n := 0
	for _, c := range s.by {
		if c.managed() {
			n++
		}
	}
	return n
}
