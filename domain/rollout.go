package domain

import (
	"errors"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/novox/postgres-provider/ports"
)

// Staged changes: a backend reports, in its checks, changes it makes only when the loop lets it
// (an extension's newer version), each under a key alike for every consumer it is for
// (ports.Update). The loop stages each key across the consumers, beside the brakes: a change no
// consumer of this provider has yet goes first to Config.Canaries consumers, which must hold it
// for Config.Soak before the rest follow (bounded by Config.Parallel, as every create is). A
// change that fails halts its rollout for every consumer until SIGHUP (RetryNow) or the
// backend's offer for it changes. What the backend refuses to make, and every change while
// updates are off, is said once per consumer and change.

// UpdatePolicy is what the loop does with the staged changes a backend reports.
type UpdatePolicy string

const (
	// Staged rolls each change out: canaries first, the rest after the soak.
	Staged UpdatePolicy = "staged"
	// Off says each change once and makes none.
	Off UpdatePolicy = "off"
)

// DefaultSoak is how long canaries hold a change before the rest follow, where Config.Soak is
// zero.
const DefaultSoak = 10 * time.Minute

// Rollout is what the loop knows of one staged change across the consumers: /status and the
// metrics show it.
type Rollout struct {
	// Key names the change, e.g. "extension vector -> 0.8.6"; Subject, From and To say it:
	// "extension vector", the versions the consumers come from ("0.8.0, 0.8.5"), and "0.8.6".
	Key     string `json:"key"`
	Subject string `json:"subject"`
	From    string `json:"from"`
	To      string `json:"to"`
	// Done of Total consumers hold it.
	Done  int `json:"done"`
	Total int `json:"total"`
	// Canaries are the consumers that take it first, while it is new to the provider; FollowAt
	// is when the rest follow, once every canary holds it (zero before).
	Canaries []string  `json:"canaries,omitempty"`
	FollowAt time.Time `json:"follow_at,omitzero"`
	// Halted is why it is halted (a consumer, the versions and the backend's reason); empty
	// while it goes on.
	Halted string `json:"halted,omitempty"`
}

// rollout is one staged change across the consumers.
type rollout struct {
	key, subject, to string
	from             map[string]string // the version each consumer due it has
	waiting          map[string]bool   // due it, as last checked
	done             map[string]bool   // hold it: made by this loop, or found so
	canaries         []string
	open             bool // the rest follow: Config.Canaries consumers held it for the soak
	halted           string
	offer            string // the backend's offer when it halted
}

// stager is the loop's rollouts. What it said of a consumer's change not made is a fact of the
// consumer's (aboutChange), said once through the loop's Told.
type stager struct {
	rollouts map[string]*rollout
	// held are, by key, the consumers this process found holding a change or made it for, and
	// when it first did. The rest follow once Config.Canaries of them have held it for the
	// soak, whoever made them hold it: a consumer created at the server's new default or
	// pinned to it takes a canary's place, and after a restart the soak starts again from what
	// the checks find, never skipped.
	held map[string]map[string]time.Time
}

// aboutChange is what a line about a consumer's change not made (refused, or with updates
// off) is about, as the loop's Told keys it; the change's key is its subject.
const aboutChange = "change not made"

func newStager() stager {
	return stager{rollouts: map[string]*rollout{}, held: map[string]map[string]time.Time{}}
}

// forgetSaid forgets what was said once of as, once it is withdrawn or dropped: the facts the
// loop and its backend told of it (its changes not made among them), but what outlives it. The
// memory would otherwise grow with every consumer that ever went, and listed again, it is said
// again.
func (h *Harness) forgetSaid(as string) { h.told.forget(as) }

// resumeRollouts resumes every halted rollout (SIGHUP), and answers whether one was: the next
// pass then checks every consumer, so that it goes on at once.
func (s *stager) resumeRollouts() (any bool) {
	for _, r := range s.rollouts {
		if r.halted != "" {
			r.halted, r.offer, any = "", "", true
		}
	}
	return any
}

// stage takes in the changes the checks found due and decides which each consumer's create may
// make now (item.updates); a check that did not look inside (Provision.SkipInside) leaves what
// was known of the consumer's changes as it was. items are in the file's order, which decides the canaries.
func (h *Harness) stage(checks []*item) {
	s := &h.stages
	for _, it := range checks { // first what is held, so that a change some consumer has is not new
		if !it.asked || it.answer().Err != nil || it.skipInside { // one that did not look inside says nothing of it
			continue
		}
		for _, r := range s.rollouts {
			delete(r.waiting, it.c.as)
		}
		for _, key := range it.answer().Has {
			s.hold(key, it.c.as, h.clock.Now())
			if r := s.rollouts[key]; r != nil {
				r.done[it.c.as] = true
			}
		}
	}
	for _, it := range checks {
		if !it.asked || it.answer().Err != nil || it.skipInside { // one that did not look inside says nothing of it
			continue
		}
		as := it.c.as
		st := h.statusOf(it.c)
		var words []string
		for _, u := range it.answer().Updates {
			switch {
			case u.Refused != "":
				words = append(words, u.Word+" ("+u.Step+" refused: "+u.Refused+")") // /status says why it stays
				h.sayUpdateOnce(as, u.Key, slog.LevelWarn, as+": "+u.Step+" refused: "+u.Refused)
				continue
			case h.cfg.Updates == Off:
				words = append(words, u.Word)
				h.sayUpdateOnce(as, u.Key, slog.LevelInfo, as+": "+u.Word+"; not updated (extension updates are off)")
				continue
			}
			words = append(words, u.Word)
			h.endUpdateFact(as, u.Key) // staged now: should it be refused again, that is said again
			r := s.rollouts[u.Key]
			if r == nil {
				r = &rollout{key: u.Key, subject: u.Subject, to: u.To, from: map[string]string{}, waiting: map[string]bool{},
					done: map[string]bool{}}
				s.rollouts[u.Key] = r
			}
			r.waiting[as], r.from[as] = true, u.From
			delete(r.done, as)
			if r.halted != "" && u.Offer != r.offer {
				r.halted, r.offer = "", ""
				h.say(slog.LevelInfo, "", "rollout of %s resumes: the backend's offer for it changed (%s)", r.key, u.Offer)
			}
		}
		if !slices.Equal(st.Updates, words) || !slices.Equal(st.Kept, it.answer().Kept) {
			st = h.editStatus(it.c)
			st.Updates, st.Kept, h.consumers.dirty = words, it.answer().Kept, true
		}
	}
	h.pruneRollouts()
	// The canaries are the first due in the file's order, wherever this pass's checks began.
	inOrder := slices.Clone(checks)
	slices.SortFunc(inOrder, func(a, b *item) int { return a.index - b.index })
	now := h.clock.Now()
	for _, key := range h.rolloutKeys() {
		r := s.rollouts[key]
		if r.halted != "" {
			continue
		}
		if !r.open {
			if from, seats := s.soakedFrom(key, h.cfg.Canaries); !from.IsZero() && !now.Before(from.Add(h.cfg.Soak)) {
				r.open = true
				h.say(slog.LevelInfo, "", "rollout of %s: the canaries (%s) held it for %s; the rest follow", r.key,
					strings.Join(seats, ", "), h.cfg.Soak)
			}
		}
		for _, it := range inOrder {
			as := it.c.as
			if !r.waiting[as] {
				continue
			}
			if !r.open && !slices.Contains(r.canaries, as) {
				if s.seats(key, r.canaries) >= h.cfg.Canaries {
					continue
				}
				r.canaries = append(r.canaries, as)
			}
			it.updates = append(it.updates, key)
		}
	}
}

// hold notes that as holds the change key, found so or made so at now.
func (s *stager) hold(key, as string, now time.Time) {
	by := s.held[key]
	if by == nil {
		by = map[string]time.Time{}
		s.held[key] = by
	}
	if _, ok := by[as]; !ok {
		by[as] = now
	}
}

// soakedFrom is when the soak of key counts from: when the n-th consumer to hold it did, and
// those n; zero while fewer hold it.
func (s *stager) soakedFrom(key string, n int) (time.Time, []string) {
	by := s.held[key]
	if len(by) < n {
		return time.Time{}, nil
	}
	first := make([]string, 0, len(by))
	for as := range by {
		first = append(first, as)
	}
	slices.SortFunc(first, func(a, b string) int {
		if c := by[a].Compare(by[b]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	first = first[:n]
	from := by[first[n-1]]
	slices.Sort(first)
	return from, first
}

// seats is how many consumers hold key or are its canaries: those places are taken.
func (s *stager) seats(key string, canaries []string) int {
	n := len(s.held[key])
	for _, as := range canaries {
		if _, ok := s.held[key][as]; !ok {
			n++
		}
	}
	return n
}

// pruneRollouts forgets, in each rollout, the consumers no longer listed, and the rollouts no
// consumer is due any more.
func (h *Harness) pruneRollouts() {
	for key, by := range h.stages.held {
		for as := range by {
			if c := h.consumers.get(as); c == nil || !c.listed {
				delete(by, as)
			}
		}
		if len(by) == 0 {
			delete(h.stages.held, key)
		}
	}
	for key, r := range h.stages.rollouts {
		for _, m := range []map[string]bool{r.waiting, r.done} {
			for as := range m {
				if c := h.consumers.get(as); c == nil || !c.listed {
					delete(m, as)
				}
			}
		}
		r.canaries = slices.DeleteFunc(r.canaries, func(as string) bool { return !r.waiting[as] && !r.done[as] })
		if len(r.waiting) == 0 {
			delete(h.stages.rollouts, key)
		}
	}
}

func (h *Harness) rolloutKeys() []string {
	keys := make([]string, 0, len(h.stages.rollouts))
	for k := range h.stages.rollouts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// sayUpdateOnce says text of as's change key where it was not what was said of it last.
func (h *Harness) sayUpdateOnce(as, key string, level slog.Level, text string) {
	h.log.Log(ports.Entry{Level: level, Consumer: as, Message: text, Once: &ports.Once{About: aboutChange, Subject: key, Fact: text}})
}

// endUpdateFact ends what was said of as's change key not made: it is made now.
func (h *Harness) endUpdateFact(as, key string) {
	h.log.Log(ports.Entry{Consumer: as, Once: &ports.Once{About: aboutChange, Subject: key}})
}

// settleUpdates records what a create let make staged changes did: each made is said in the
// audit trail and counts in its rollout (the canaries' soak starts once they all hold it); one
// that failed halts its rollout for every consumer, said once at ERROR, and the rest of the
// create stands. It answers the create's error without that failure.
func (h *Harness) settleUpdates(it *item) error {
	if len(it.updates) == 0 || !it.called {
		return it.err
	}
	var failed *ports.UpdateFailed
	if it.err != nil && !errors.As(it.err, &failed) {
		return it.err
	}
	c := it.c
	for _, key := range it.updates {
		r := h.stages.rollouts[key]
		if r == nil {
			continue
		}
		if failed != nil && failed.Update.Key == key {
			if r.halted == "" {
				r.halted = c.as + ": " + failed.Update.Step + " failed: " + h.scrubbed(c, errors.New(failed.Reason))
				r.offer = failed.Update.Offer
				h.say(slog.LevelError, c.as, "rollout of %s halted for every consumer: %s; each keeps the version it has "+
					"until SIGHUP or the server's versions of it change", r.key, r.halted)
			}
			continue
		}
		for _, u := range it.answer().Updates {
			if u.Key == key {
				h.audit(c, "extension updated", c.as+": "+u.Done)
			}
		}
		delete(r.waiting, c.as)
		r.done[c.as] = true
		h.stages.hold(key, c.as, h.clock.Now())
		if len(r.waiting) == 0 {
			delete(h.stages.rollouts, key) // every consumer holds it
		}
	}
	st := h.editStatus(c)
	st.Updates = slices.DeleteFunc(slices.Clone(st.Updates), func(w string) bool {
		for _, u := range it.answer().Updates {
			if u.Word == w && slices.Contains(it.updates, u.Key) && (failed == nil || failed.Update.Key != u.Key) {
				return true
			}
		}
		return false
	})
	if len(st.Updates) == 0 {
		st.Updates = nil
	}
	h.consumers.dirty = true
	if failed != nil {
		return nil // the failure was the update's, and halted its rollout; the create stands
	}
	return it.err
}

// rolloutViews are the rollouts for a Report, by key.
func (h *Harness) rolloutViews() []Rollout {
	if len(h.stages.rollouts) == 0 {
		return nil
	}
	out := make([]Rollout, 0, len(h.stages.rollouts))
	for _, key := range h.rolloutKeys() {
		r := h.stages.rollouts[key]
		var from []string
		for _, v := range r.from {
			if v != "" && !slices.Contains(from, v) {
				from = append(from, v)
			}
		}
		sort.Strings(from)
		v := Rollout{Key: r.key, Subject: r.subject, From: strings.Join(from, ", "), To: r.to, Done: len(r.done),
			Total: len(r.done) + len(r.waiting), Canaries: slices.Clone(r.canaries), Halted: r.halted}
		if !r.open {
			if from, seats := h.stages.soakedFrom(key, h.cfg.Canaries); !from.IsZero() {
				v.FollowAt, v.Canaries = from.Add(h.cfg.Soak), seats // those soaking it, found holding it or made so
			}
		}
		out = append(out, v)
	}
	return out
}

// planUpdates adds to p what a pass would do of the staged changes f says the consumer is due,
// and what is kept that its entry no longer names.
func planUpdates(p *Planned, f ports.Foresight, off bool) {
	for _, u := range f.Updates {
		switch {
		case u.Refused != "":
			p.Why = append(p.Why, u.Step+" refused: "+u.Refused)
		case off:
			p.Why = append(p.Why, u.Word+"; not updated (extension updates are off)")
		default:
			if p.Act == string(ports.ActNone) {
				p.Act = PlanUpdate
			}
			p.Why = append(p.Why, u.Step)
		}
	}
	p.Why = append(p.Why, f.Kept...)
}
