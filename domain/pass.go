package domain

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"slices"
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

	index     int // its position in the file
	act       action
	continued bool          // a check the last pass did not get an answer to
	asked     bool          // a check was made; its answer counts
	notAsked  bool          // a check was planned and not made (an earlier one timed out, or a stop)
	checked   ports.Checked // a check's answer
	created   bool          // Create was called
	err       error         // Create's error
	brake     brake         // what the consumer's brake was when the pass began
	timedOut  bool
}

// Reconcile is one pass. One consumer's failure never stops the others'.
func (h *Harness) Reconcile(ctx context.Context) (r Report) {
	h.step()
	if h.retry.Swap(false) {
		clear(h.refusals)
	}
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
	if !h.recordRead || verifying || len(h.unasked) > 0 || h.anyChanged(items) || h.due(leaving) {
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
		it.index = i
		pw, unreadable, refused := h.readSecret(g.As, g.Secret)
		if unreadable != nil || refused != nil {
			it.unreadable, it.refused = unreadable, refused
			continue
		}
		delete(h.waiting, g.As)
		delete(h.refused, g.As) // a refusal that comes back after a usable secret is said again
		h.setPassword(g.As, pw)
		it.p = ports.Provision{As: g.As, Password: pw, Values: g.Values, Derived: g.Derived, At: g.At, Node: g.Node}
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
			delete(h.unasked, it.g.As)
			continue
		}
		as := it.g.As
		was, applied := h.applied[as]
		rec, recorded := h.record[as]
		b, braked := h.lost[as]
		it.brake = b
		off := h.refusals[as]
		if off != nil && off.hash != it.hash {
			delete(h.refusals, as) // what it asks for changed: tried at once
			off = nil
		}
		switch {
		case applied && was.hash == it.hash:
			_, unasked := h.unasked[as]
			if (verifying || unasked) && !(braked && now.Before(b.nextAt)) {
				it.act, it.continued = check, !verifying
			}
		case off != nil && now.Before(off.nextAt):
			// Refused, or asking for what cannot be made: not asked again before its wait is over.
		case !applied && recorded && !rec.Withdrawn:
			it.act = confirm
		default:
			it.act = create
		}
		if it.act != check && it.act != confirm {
			delete(h.unasked, as) // braked, changed or backing off: no longer a check to continue
		}
	}
}

// run asks the backend what the plan says: the creates first, then every check in one batch,
// then the creates of what the checks found lost. Every answer counts. The backend stops
// checking after a check that timed out; the checks it did not make, and the one that timed out
// (once), are asked on the next pass, which starts where this one stopped, so that a timeout
// never leaves the consumers after it unchecked for good.
func (h *Harness) run(ctx context.Context, items []*item) {
	h.creates(ctx, items, func(it *item) bool { return it.act == create })

	var checks []*item
	for _, it := range items {
		if it.act == check || it.act == confirm {
			checks = append(checks, it)
		}
	}
	if len(checks) == 0 {
		return
	}
	// Where the last pass stopped first, then the rest in the file's order.
	at, _ := slices.BinarySearchFunc(checks, h.resume, func(it *item, i int) int { return it.index - i })
	checks = append(checks[at:len(checks):len(checks)], checks[:at]...)
	ps := make([]ports.Provision, len(checks))
	for i, it := range checks {
		ps[i] = it.p
	}
	answers := h.backend.HoldsAll(ctx, ps, h.cfg.HoldsTimeout)
	h.step()
	h.resume = 0
	stopped := false
	for i, it := range checks {
		it.checked = answers[i]
		err := it.checked.Err
		switch {
		case err != nil && (errors.Is(err, ports.ErrNotAsked) || ctx.Err() != nil):
			it.notAsked = true
			if !stopped {
				stopped, h.resume = true, it.index
			}
		default:
			it.asked, it.timedOut = true, errors.Is(err, context.DeadlineExceeded)
		}
		timeouts := h.unasked[it.g.As] // its own, this verify round
		if !it.continued {
			timeouts = 0
		}
		delete(h.unasked, it.g.As)
		switch {
		case it.notAsked:
			h.unasked[it.g.As] = timeouts
		case it.timedOut && timeouts == 0:
			h.unasked[it.g.As] = 1 // asked once more; a check that keeps timing out waits for the next round
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
		if ctx.Err() != nil {
			return // a stop: what was not started is left as it is, and not said
		}
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
	shared := h.sharedCauses(items)
	for _, it := range items {
		as := it.g.As
		switch {
		case h.settleSecret(it):
		case it.act == nothing:
			h.setState(as, h.state(as), "")
		case it.act == create:
			h.settleCreate(it, 0, r)
		case !it.asked:
			// Not asked (an earlier check timed out, or a stop): unchecked, and asked next pass.
			if it.notAsked {
				r.Unchecked++
			}
			h.setState(as, h.stateOrUnchecked(as), "")
		case it.checked.Err != nil:
			// Unable to ask is not evidence of loss.
			r.Unchecked++
			r.CheckErrors++
			text := h.scrubbed(as, it.checked.Err)
			if s := shared[cause(it.checked.Err)]; s != nil {
				h.sayShared(s)
			} else if h.uncheckableOf(as).again(text) {
				h.say(slog.LevelWarn, as, "%s: could not check the backend%s: %s", as, h.retrying(", will ask again"), text)
			}
			h.setState(as, h.stateOrUnchecked(as), text)
		default:
			delete(h.uncheckable, as)
			h.settleCheck(it, r)
		}
	}
	r.Consumers, r.Status = h.views(items)
}

// sharedCause is a reason several consumers could not be checked in one pass: said once for
// all of them, as a problem of the backend.
type sharedCause struct {
	text   string
	logins []string
	said   bool
}

// sharedCauses are the reasons more than one consumer could not be checked this pass, by the
// text of their innermost error. What was said of a cause no consumer met this pass is
// forgotten: it is said again should it come back.
func (h *Harness) sharedCauses(items []*item) map[string]*sharedCause {
	var byCause map[string]*sharedCause
	for _, it := range items {
		if !it.asked || it.checked.Err == nil || h.secretUnusable(it) {
			continue
		}
		if byCause == nil {
			byCause = map[string]*sharedCause{}
		}
		c := cause(it.checked.Err)
		s := byCause[c]
		if s == nil {
			s = &sharedCause{text: h.scrubbed("", errors.New(c))}
			byCause[c] = s
		}
		s.logins = append(s.logins, it.g.As)
	}
	met := make(map[string]bool, len(byCause))
	for c, s := range byCause {
		if len(s.logins) < 2 {
			delete(byCause, c)
			continue
		}
		met[s.text] = true
	}
	for text := range h.shared {
		if !met[text] {
			delete(h.shared, text)
		}
	}
	return byCause
}

// sayShared says, the first time in a pass, that the consumers of s could not be checked:
// when the cause is new, and while it lasts, every loudlyEvery-th pass.
func (h *Harness) sayShared(s *sharedCause) {
	if s.said {
		return
	}
	s.said = true
	rep := h.shared[s.text]
	if rep == nil {
		rep = &repeat{}
		h.shared[s.text] = rep
	}
	if !rep.again(s.text) {
		return
	}
	who := strings.Join(s.logins[:min(3, len(s.logins))], ", ")
	if len(s.logins) > 3 {
		who += ", ..."
	}
	h.say(slog.LevelWarn, "", "could not check the backend for %d consumers (%s)%s: %s", len(s.logins), who,
		h.retrying(", will ask again"), s.text)
}

func (h *Harness) uncheckableOf(as string) *repeat {
	r := h.uncheckable[as]
	if r == nil {
		r = &repeat{}
		h.uncheckable[as] = r
	}
	return r
}

func (h *Harness) secretUnusable(it *item) bool { return it.unreadable != nil || it.refused != nil }

// cause is the text of the innermost error of err that its text ends with: what a wrapper that
// names the consumer ("check letta: ...") says of, and what consumers that met the same
// problem share.
func cause(err error) string {
	for {
		var next []error
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			next = []error{u.Unwrap()}
		case interface{ Unwrap() []error }:
			next = u.Unwrap()
		}
		text, found := err.Error(), false
		for _, n := range next {
			if n != nil && n.Error() != "" && strings.HasSuffix(text, n.Error()) {
				err, found = n, true
				break
			}
		}
		if !found {
			return text
		}
	}
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
			h.applied[as] = appliedEntry{hash: it.hash}
			h.changes++
		}
		h.setState(as, h.state(as), "")
		return
	}
	st.Drift, h.dirty = it.checked.Drift, true
	if !it.created {
		// Not held, and not applied again: the pass was stopped first.
		h.setState(as, h.stateOrUnchecked(as), "")
		return
	}
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
	if !it.created {
		// The pass was stopped before it: left as it was, for the next start.
		h.setState(as, h.stateOrUnchecked(as), "")
		return
	}
	if it.err != nil {
		r.Failures++
		text := h.createFailed(as, it.err)
		if reapplying > 0 {
			// The brake keeps its count: the next check may apply again at once.
			h.lost[as] = brake{times: reapplying - 1}
		} else if errors.Is(it.err, ports.ErrRefused) || errors.Is(it.err, ports.ErrInvalid) {
			h.backOff(it)
		} else {
			delete(h.refusals, as) // transient: tried again next pass
		}
		h.setState(as, StateFailing, text)
		return
	}
	delete(h.refusals, as)
	if f, was := h.failing[as]; was {
		h.say(slog.LevelInfo, as, "%s: created, after %d failed attempt(s)", as, f.times)
		delete(h.failing, as)
	}
	h.applied[as] = appliedEntry{hash: it.hash}
	h.record[as] = ports.Managed{As: as}
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
	text := h.scrubbed(as, err)
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
	for as := range h.refusals {
		if !want[as] {
			delete(h.refusals, as)
		}
	}
	for as := range h.unasked {
		if !want[as] {
			delete(h.unasked, as)
		}
	}
	for _, m := range []map[string]*repeat{h.failing, h.refused, h.uncheckable} {
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
			h.dropPassword(as)
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

// backOff spaces out the creates of a consumer that was refused, or asks for what cannot be
// made: the next try waits Every, doubled per refusal in a row, at most maxRefusedWait. Its
// line is said as any failed create's (the first time, then every loudlyEvery-th).
func (h *Harness) backOff(it *item) {
	b := h.refusals[it.g.As]
	if b == nil || b.hash != it.hash {
		b = &refusal{hash: it.hash}
		h.refusals[it.g.As] = b
	}
	b.times++
	b.nextAt = h.clock.Now().Add(refusedWait(h.cfg.Every, b.times))
}
