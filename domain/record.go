package domain

import (
	"context"
	"errors"
	"log/slog"

	"github.com/novox/postgres-provider/ports"
)

// The lease and the backend's record: a pass that may act asks the lease first, and reads the
// record (which is also the check of the backend as a whole) before it asks anything of a
// consumer.

// askLease asks whether this replica holds the lease, and answers whether it may act. A replica that takes the
// lease forgets what it remembered of the backend: another replica may have acted meanwhile,
// and the backend's record says what is managed now.
//
// A lease that cannot be asked for is the backend's problem, said as readRecord says one.
func (h *Harness) askLease(ctx context.Context, r *Report) bool {
	if h.lease == nil {
		return true
	}
	err := h.lease.Held(ctx)
	h.step()
	switch {
	case err == nil:
		if !h.acting {
			h.forgetAll()
		}
		if h.server.text != "" {
			h.recordRead = false // read it again, which says the problem is over
		}
		h.acting = true
		return true
	case errors.Is(err, ports.ErrStandby):
		r.Standby = true
	default:
		h.serverProblem(err, r)
	}
	h.acting = false
	return false
}

// readRecord asks the backend, as a whole, what it manages; it is the first thing a pass that
// uses the backend does, but for one that only checks parts of consumers on their budget,
// which checks the backend as a whole without the record (standing). A backend that cannot be
// asked is said once (again when the problem changes, and every loudlyEvery-th pass it lasts),
// and once when it is over; its pass asks nothing of any consumer and withdraws nothing.
func (h *Harness) readRecord(ctx context.Context, r *Report) bool {
	cctx, cancel := h.clock.WithTimeout(ctx, h.cfg.HoldsTimeout)
	start := h.clock.Now()
	managed, err := h.backend.Managed(cctx)
	cancel()
	h.step()
	h.debug("", "record: %d consumers read in %s", len(managed), h.clock.Now().Sub(start))
	if !h.stands(err, r) {
		return false
	}
	h.consumers.recordIs(managed)
	if !h.peakRead {
		// A start or a take-over: the baseline of the mass-withdrawal brake is the record's.
		h.peak.rebuild(h.clock.Now(), h.consumers.count(), managed)
		h.peakRead = true
	}
	h.recordRead = true
	return true
}

// standing checks the backend as a whole without reading its record, as readRecord does it.
func (h *Harness) standing(ctx context.Context, r *Report) bool {
	cctx, cancel := h.clock.WithTimeout(ctx, h.cfg.HoldsTimeout)
	err := h.backend.Standing(cctx)
	cancel()
	h.step()
	return h.stands(err, r)
}

// stands answers whether the backend as a whole can be used, after a check of it answered err;
// where it cannot, it says why (serverProblem), and where it can after it could not, that the
// problem is over.
func (h *Harness) stands(err error, r *Report) bool {
	if err != nil {
		h.serverProblem(err, r)
		return false
	}
	if h.server.text != "" {
		h.say(slog.LevelInfo, "", "the backend can be used again (it was: %s)", h.server.text)
		h.server = repeat{}
	}
	return true
}

// serverProblem records and says, once until it changes and every loudlyEvery-th pass it lasts,
// why the backend as a whole cannot be used.
func (h *Harness) serverProblem(err error, r *Report) {
	text := h.scrubbed(nil, err)
	r.ServerProblem = text
	if h.server.tally(text) {
		consequence := "nothing is created, checked or withdrawn until this is resolved"
		if errors.Is(err, ports.ErrInRecovery) {
			consequence = "nothing is created, checked or withdrawn until it is promoted or the URL names a primary"
		}
		if h.cfg.Once {
			consequence = "nothing was created, checked or withdrawn"
		}
		h.say(slog.LevelError, "", "%s; %s", text, consequence)
	}
}
