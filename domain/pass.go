package domain

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/novox/postgres-provider/ports"
)

// A pass is planned, run and settled. The plan reads every secret and decides, per consumer in
// the file's order, what to ask of the backend; the run asks it, concurrently and bounded by
// Config.Parallel (creates of new and changed consumers first, so that a change never waits for
// the checks, then the checks in one batch, then the creates of what the checks found lost);
// the settle walks the consumers in the file's order again and says what happened, so the lines
// are the same whatever order the answers came in.

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
)

// item is one listed consumer's part in a pass.
type item struct {
	g          contribution
	p          ports.Provision
	hash       [sha256.Size]byte
	unreadable error // its secret could not be read
	refused    error // its secret cannot be a password

	act      action
	asked    bool          // a check's answer counts: it came before any check that timed out
	checked  ports.Checked // a check's answer
	created  bool          // Create was called
	err      error         // Create's error
	brake    brake         // what the consumer's brake was when the pass began
	timedOut bool
}

// Reconcile is one pass. One consumer's failure never stops the others'.
func (h *Harness) Reconcile(ctx context.Context) (r Report) {
	h.step()
	start := h.clock.Now()
	defer func() {
		r.Took = h.clock.Now().Sub(start)
		h.step()
	}()
	r.Watched = []string{h.cfg.Receives}
	given, ok := h.readContributions()
	if !ok {
		h.leading(ctx, &r) // a file that says nothing is no reason not to say the backend's problem
		return r
	}
	r.FileRead, r.BadEntries = true, h.file.bad
	want := h.listed(given)
	r.Watched = h.watched
	if !h.leading(ctx, &r) {
		if r.ServerProblem != "" {
			h.settleUnchecked(h.readSecrets(given), &r)
		}
		return r
	}

	verifying := h.clock.Now().Sub(h.verifiedAt) >= h.cfg.VerifyEvery
	if verifying {
		h.verifiedAt = h.clock.Now()
	}
	items := h.readSecrets(given)
	leaving := h.leaving(want)
	if !h.recordRead || verifying || h.anyChanged(items) || h.due(leaving) {
		// The backend is used this pass: first as a whole, which also reads its record.
		if !h.readRecord(ctx, &r) {
			h.settleUnchecked(items, &r)
			return r
		}
		leaving = h.leaving(want)
	}
	h.plan(items, verifying)
	h.run(ctx, items)
	h.settle(items, &r)
	h.withdraw(ctx, leaving, &r)
	return r
}

// listed is the set of logins the file lists. It, the files worth watching, and what the loop
// forgets of consumers that left, change only when the file does.
func (h *Harness) listed(given []contribution) map[string]bool {
	if h.want != nil && h.wantFor == h.file.digest {
		return h.want
	}
	want := make(map[string]bool, len(given))
	watched := make([]string, 0, len(given)+1)
	watched = append(watched, h.cfg.Receives)
	for _, g := range given {
		want[g.As] = true
		watched = append(watched, g.Secret)
	}
	h.want, h.wantFor, h.watched = want, h.file.digest, watched
	h.changes++
	h.forget(want)
	h.dirty = true
	return want
}

// readSecrets reads each listed consumer's secret and makes what it asks for. The items are
// the pass's own, in memory reused from the pass before.
func (h *Harness) readSecrets(given []contribution) []*item {
	if cap(h.items) < len(given) {
		h.items, h.itemPtrs = make([]item, len(given)), make([]*item, len(given))
	}
	items := h.itemPtrs[:len(given)]
	for i, g := range given {
		it := &h.items[i]
		*it = item{g: g}
		items[i] = it
		pw, unreadable, refused := h.readSecret(g.As, g.Secret)
		if unreadable != nil || refused != nil {
			it.unreadable, it.refused = unreadable, refused
			continue
		}
		delete(h.waiting, g.As)
		if h.passwords[g.As] != pw {
			h.passwords[g.As] = pw
		}
		it.p = ports.Provision{As: g.As, Password: pw, Values: g.Values, Derived: g.Derived, At: g.At, Consumer: g.Node}
		it.hash = h.hashOf(g, pw)
	}
	return items
}

// hashOf is the fingerprint of what g asks for under password pw: a digest, so the loop's memory
// keeps no password in it. It is remembered with the secret, and made again only when the
// password or what g asks for changed.
func (h *Harness) hashOf(g contribution, pw string) [sha256.Size]byte {
	m := h.secrets[g.As]
	if m.password == pw && m.shape == g.shape && m.hashed {
		return m.hash
	}
	sum := sha256.New()
	sum.Write(g.shape[:])
	sum.Write([]byte(pw))
	var hash [sha256.Size]byte
	sum.Sum(hash[:0])
	if m.password == pw {
		m.shape, m.hash, m.hashed = g.shape, hash, true
		h.secrets[g.As] = m
	}
	return hash
}

// anyChanged is whether some consumer is not applied as it now asks to be.
func (h *Harness) anyChanged(items []*item) bool {
	for _, it := range items {
		if was, ok := h.applied[it.g.As]; it.unreadable == nil && it.refused == nil && (!ok || was.hash != it.hash) {
			return true
		}
	}
	return false
}

// plan decides what to ask of the backend for each consumer.
func (h *Harness) plan(items []*item, verifying bool) {
	now := h.clock.Now()
	for _, it := range items {
		if it.unreadable != nil || it.refused != nil {
			continue
		}
		as := it.g.As
		was, applied := h.applied[as]
		rec, recorded := h.record[as]
		b, braked := h.lost[as]
		it.brake = b
		switch {
		case applied && was.hash == it.hash:
			if verifying && !(braked && now.Before(b.nextAt)) {
				it.act = check
			}
		case !applied && recorded && !rec.Withdrawn:
			it.act = confirm
		default:
			it.act = create
		}
	}
}

// run asks the backend what the plan says: the creates first, then every check in one batch,
// then the creates of what the checks found lost. A check that timed out stops checking for the
// rest of the pass: the answers of the consumers after it in the file's order do not count.
func (h *Harness) run(ctx context.Context, items []*item) {
	h.creates(ctx, items, func(it *item) bool { return it.act == create })

	var checks []*item
	var ps []ports.Provision
	for _, it := range items {
		if it.act == check || it.act == confirm {
			checks = append(checks, it)
			ps = append(ps, it.p)
		}
	}
	if len(checks) == 0 {
		return
	}
	answers := h.backend.HoldsAll(ctx, ps, h.cfg.HoldsTimeout)
	h.step()
	for i, it := range checks {
		it.asked, it.checked = true, answers[i]
		if it.checked.Err != nil && errors.Is(it.checked.Err, context.DeadlineExceeded) {
			it.timedOut = true
			break
		}
	}
	h.creates(ctx, items, func(it *item) bool { return it.asked && it.checked.Err == nil && !it.checked.Held })
}

// creates calls Create for each item that which picks, at most Config.Parallel at once.
func (h *Harness) creates(ctx context.Context, items []*item, which func(*item) bool) {
	var picked []*item
	for _, it := range items {
		if which(it) {
			picked = append(picked, it)
		}
	}
	h.each(len(picked), func(i int) {
		it := picked[i]
		it.created = true
		it.err = h.backend.Create(ctx, it.p)
		h.step()
	})
}

// each calls fn(0) ... fn(n-1), at most Config.Parallel at once, and returns when all have.
func (h *Harness) each(n int, fn func(i int)) {
	if h.cfg.Parallel <= 1 || n <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, h.cfg.Parallel)
	for i := range n {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			fn(i)
		}()
	}
	wg.Wait()
}

// settle walks the consumers in the file's order and records and says what the run found.
func (h *Harness) settle(items []*item, r *Report) {
	for _, it := range items {
		as := it.g.As
		switch {
		case h.settleSecret(it):
		case it.act == nothing:
			h.setState(as, h.state(as), "")
		case it.act == create:
			h.settleCreate(it, 0, r)
		case !it.asked:
			h.setState(as, h.stateOrUnchecked(as), "")
		case it.checked.Err != nil:
			// Unable to ask is not evidence of loss.
			r.Unchecked++
			h.say(slog.LevelWarn, as, "%s: could not check the backend%s: %s", as, h.retrying(", will ask again"), h.scrubbed(it.checked.Err))
			h.setState(as, h.stateOrUnchecked(as), h.scrubbed(it.checked.Err))
		default:
			h.settleCheck(it, r)
		}
	}
	r.Consumers, r.Status = h.views(items)
}

// views are the consumers' states and statuses for a Report, made anew only where some changed:
// a Report's maps and slices are never changed once handed out.
func (h *Harness) views(items []*item) (map[string]State, []Status) {
	if !h.dirty && len(h.viewStatus) == len(items) {
		return h.viewStates, h.viewStatus
	}
	states := make(map[string]State, len(items))
	status := make([]Status, len(items))
	for i, it := range items {
		st := h.status[it.g.As]
		states[it.g.As], status[i] = st.State, *st
	}
	h.viewStates, h.viewStatus, h.dirty = states, status, false
	return states, status
}

// settleCheck records a check's answer: held releases the brake; not held was applied again.
func (h *Harness) settleCheck(it *item, r *Report) {
	as := it.g.As
	st := h.statusOf(as)
	st.CheckedAt, h.dirty = h.clock.Now(), true
	if it.checked.Held {
		st.Drift, h.dirty = nil, true
		delete(h.lost, as)
		if it.act == confirm {
			h.applied[as] = appliedEntry{hash: it.hash, derived: it.p.Derived}
			h.changes++
		}
		h.setState(as, h.state(as), "")
		return
	}
	st.Drift, h.dirty = it.checked.Drift, true
	if it.act == confirm {
		// Made before this process started (or by another replica), and not as asked now: a
		// create like any other.
		h.settleCreate(it, 0, r)
		return
	}
	reapplying := it.brake.times + 1
	if reapplying == 1 {
		h.say(slog.LevelWarn, as, "%s: the backend no longer holds it; applying again", as)
	} else {
		h.say(slog.LevelWarn, as, "%s: still not held after being applied again (%d times in a row) — create does not "+
			"produce what holds checks; applying again", as, reapplying)
	}
	if len(it.checked.Drift) > 0 {
		h.say(slog.LevelWarn, as, "%s: what drifted: %s", as, strings.Join(it.checked.Drift, ", "))
	}
	h.settleCreate(it, reapplying, r)
}

// settleCreate records a create, of a new or changed consumer (reapplying 0) or of one the
// backend lost for the reapplying-th time in a row.
func (h *Harness) settleCreate(it *item, reapplying int, r *Report) {
	as := it.g.As
	if it.err != nil {
		r.Failures++
		text := h.createFailed(as, it.err)
		if reapplying > 0 {
			// The brake keeps its count: the next check may apply again at once.
			h.lost[as] = brake{times: reapplying - 1}
		}
		h.setState(as, StateFailing, text)
		return
	}
	if f, was := h.failing[as]; was {
		h.say(slog.LevelInfo, as, "%s: created, after %d failed attempt(s)", as, f.times)
		delete(h.failing, as)
	}
	h.applied[as] = appliedEntry{hash: it.hash, derived: it.p.Derived}
	h.record[as] = ports.Managed{As: as, Derived: it.p.Derived}
	h.changes++
	delete(h.removing, as)
	if reapplying == 0 {
		r.Created++
		delete(h.lost, as)
		h.setState(as, StateApplied, "")
		return
	}
	r.Reapplied++
	wait := backoff(h.cfg.VerifyEvery, reapplying)
	h.lost[as] = brake{times: reapplying, nextAt: h.clock.Now().Add(wait)}
	if reapplying > 1 {
		h.say(slog.LevelWarn, as, "%s: next check in %s", as, wait.Round(time.Second))
	}
	h.setState(as, StateBraked, "")
}

// createFailed says a failed create the first time, and while it fails the same way, every
// loudlyEvery-th time; a different error starts the count again. It answers the error's text.
func (h *Harness) createFailed(as string, err error) string {
	text := h.scrubbed(err)
	f := h.failing[as]
	if f == nil {
		f = &repeat{}
		h.failing[as] = f
	}
	if f.again(text) {
		h.say(slog.LevelWarn, as, "%s: create failed%s: %s", as, h.retrying(", will retry"), text)
	}
	return text
}

// settleUnchecked records a pass in which the backend could not be used: consumers it would
// have been asked about are unchecked; those whose secrets cannot be used are said as always.
func (h *Harness) settleUnchecked(items []*item, r *Report) {
	for _, it := range items {
		if !h.settleSecret(it) {
			r.Unchecked++
			h.setState(it.g.As, h.stateOrUnchecked(it.g.As), r.ServerProblem)
		}
	}
	r.Consumers, r.Status = h.views(items)
}

// settleSecret records and says a consumer whose secret cannot be used, and reports whether
// that was so.
func (h *Harness) settleSecret(it *item) bool {
	switch {
	case it.unreadable != nil:
		h.secretUnreadable(it.g, it.unreadable)
		h.setState(it.g.As, StateWaitingForSecret, "")
	case it.refused != nil:
		h.setState(it.g.As, StateFailing, h.secretRefused(it.g, it.refused))
	default:
		return false
	}
	return true
}

// forget drops what the loop counted for consumers that left the file. What was applied stays
// until it is withdrawn.
func (h *Harness) forget(want map[string]bool) {
	for _, m := range []map[string]*repeat{h.failing, h.refused} {
		for as := range m {
			if !want[as] {
				delete(m, as)
			}
		}
	}
	for as := range h.waiting {
		if !want[as] {
			delete(h.waiting, as)
		}
	}
	for as := range h.secrets {
		if !want[as] {
			delete(h.secrets, as)
		}
	}
	for as := range h.status {
		if !want[as] {
			delete(h.status, as)
		}
	}
	for as := range h.passwords {
		if _, applied := h.applied[as]; !want[as] && !applied {
			delete(h.passwords, as)
		}
	}
}

// state is what the loop knows of an applied consumer it did not touch this pass.
func (h *Harness) state(as string) State {
	if _, failing := h.failing[as]; failing {
		return StateFailing
	}
	if b, braked := h.lost[as]; braked && b.times > 0 {
		return StateBraked
	}
	return StateApplied
}

// stateOrUnchecked is state for a consumer this process applied, and unchecked for one it has
// not yet.
func (h *Harness) stateOrUnchecked(as string) State {
	if _, applied := h.applied[as]; applied {
		return h.state(as)
	}
	if _, failing := h.failing[as]; failing {
		return StateFailing
	}
	return StateUnchecked
}

func (h *Harness) statusOf(as string) *Status {
	st := h.status[as]
	if st == nil {
		st = &Status{As: as}
		h.status[as] = st
	}
	return st
}

// setState records where a consumer stands, since when, its last error, and its next check.
func (h *Harness) setState(as string, s State, lastError string) {
	st := h.statusOf(as)
	was := *st
	if st.State != s || st.Since.IsZero() {
		st.State, st.Since = s, h.clock.Now()
	}
	if lastError != "" || s == StateApplied || s == StateBraked {
		st.LastError = lastError
	}
	st.NextCheck = time.Time{}
	if _, applied := h.applied[as]; applied {
		st.NextCheck = h.verifiedAt.Add(h.cfg.VerifyEvery)
		if b, braked := h.lost[as]; braked && b.nextAt.After(st.NextCheck) {
			st.NextCheck = b.nextAt
		}
	}
	if st.State != was.State || st.Since != was.Since || st.LastError != was.LastError || st.NextCheck != was.NextCheck {
		h.dirty = true
	}
}
