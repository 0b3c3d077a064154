package domain

import (
	"context"
	"time"
)

// A pass reads its inputs (the file and every listed consumer's secret), plans what to ask of
// the backend for each consumer (the listed ones in the file's order, then those leaving), runs
// it through one bounded runner (creates of new and changed consumers first, so that a change
// never waits for the checks; then the checks in one batch; then the creates of what the checks
// found lost; then, on firm ground, the withdrawals and drops), and settles: it says what
// happened in the file's order, so the lines are the same whatever order the answers came in.
//
//	inputs.go   the file's listing and the secrets
//	plan.go     what to ask for each consumer, and who is leaving
//	run.go      the backend calls, at most Config.Parallel at once
//	settle.go   what the answers mean, and the lines that say so
//	status.go   each consumer's status, and the Report's views of them

// Reconcile is one pass. One consumer's failure never stops the others'.
func (h *Harness) Reconcile(ctx context.Context) (r Report) {
	h.step()
	h.begin()
	defer h.end()
	retried := h.retry.Swap(false)
	if retried {
		for _, c := range h.consumers.by {
			if c.refusal != nil { // tried at once, and still refused until it is made
				c.refusal.times, c.refusal.nextAt = 0, time.Time{}
			}
		}
		h.lookInsideNow()
		if h.stages.resumeRollouts() {
			h.verifiedAt = time.Time{} // checked at once, so that the rollout goes on
		}
	}
	start := h.clock.Now()
	h.heldUntil = time.Time{} // said again by this pass's withdraw, if it gets there
	woken := h.woken.Swap(false)
	h.lookAtSecrets = woken || retried || h.watching == nil || !h.watching() // SIGHUP reads the secrets again too
	defer func() {
		r.Took = h.clock.Now().Sub(start)
		r.Leaving = h.leavingViews()
		r.Rollouts = h.rolloutViews()
		h.debug("", "pass: %d listed, %d created, %d reapplied, %d withdrawn, %d dropped, %d failed, %d unchecked, "+
			"%d withdrawals held; took %s", len(r.Status), r.Created, r.Reapplied, r.Withdrawn, r.Dropped, r.Failures,
			r.Unchecked, r.WithdrawalsHeld, r.Took)
		h.step()
	}()
	r.Watched = []string{h.cfg.Receives}
	given, ok := h.readContributions()
	if !ok {
		r.FileProblem = h.file.warning
		r.Consumers, r.Status = h.viewStates, h.viewStatus // the last listing read stands, as it was
		h.askLease(ctx, &r)                                // a file that says nothing is no reason not to say the backend's problem
		return r
	}
	r.FileRead, r.BadEntries = true, h.file.bad
	h.takeListing(given)
	r.Watched = h.watched
	if !h.askLease(ctx, &r) {
		if r.ServerProblem != "" {
			h.settleUnchecked(h.readSecrets(given), &r)
		}
		return r
	}
	h.takeListing(given) // again where taking the lease made the loop forget all it knew

	verifying := h.clock.Now().Sub(h.verifiedAt) >= h.cfg.VerifyEvery
	if verifying {
		h.verifiedAt = h.clock.Now()
		h.lookAtSecrets = true
	}
	items := h.readSecrets(given)
	h.listing(items)
	leaving := h.planLeaving()
	// The record is read at a verify pass, where a consumer changed or is to be withdrawn, and
	// by the first pass that uses the backend after it could not be used.
	record, partDue := !h.recordRead || verifying, false
	if !record {
		var changed bool
		changed, partDue = h.pending(items)
		record = changed || h.due(leaving) || partDue && h.server.text != ""
	}
	switch {
	case record:
		// The backend is used this pass: first as a whole, which also reads its record.
		h.phase("reading the record", 0)
		if !h.readRecord(ctx, &r) {
			h.settleUnchecked(items, &r)
			return r
		}
		leaving = h.planLeaving()
	case partDue:
		// Only parts of checks on their budget are due: the backend as a whole is checked, and
		// the record is read by the next pass that needs it (a verify pass at the latest).
		if !h.standing(ctx, &r) {
			h.settleUnchecked(items, &r)
			return r
		}
	}
	h.phase("planning", 0)
	h.plan(items, verifying)
	h.grant(items)
	h.run(ctx, items)
	h.phase("settling", 0)
	h.settle(items, &r)
	if !record && h.due(leaving) {
		// Fallen due while this pass checked what was due: withdrawn on a record read first.
		h.phase("reading the record", 0)
		if !h.readRecord(ctx, &r) {
			return r
		}
		leaving = h.planLeaving()
	}
	h.withdraw(ctx, leaving, &r)
	return r
}
