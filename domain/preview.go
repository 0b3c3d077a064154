package domain

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/novox/postgres-provider/ports"
)

// What a pass would do, said before it does it: `provisioner plan`. A preview reads what a pass
// reads (the file, the secrets, the backend's record), asks the backend what each create would
// do (Foresee, which changes nothing), and decides each withdrawal with the pass's own rules
// (leaving, hold, settled, the drop delay). It takes no lease and changes nothing.

// Planned.Act's words for the acts the loop decides, as ports.Act declares them (the backend's
// are its Foresee's answer): a string, as Planned.Act is.
const (
	// PlanWithdraw: no longer listed, still active: its login is taken away (At: when, where
	// it waits for the file to settle; Held: a mass withdrawal).
	PlanWithdraw = string(ports.ActWithdraw)
	// PlanDrop: no longer listed, and dropped with its data (At: when).
	PlanDrop = string(ports.ActDrop)
	// PlanWait: listed, and its secret cannot be used yet: nothing is done for it.
	PlanWait = string(ports.ActWait)
	// PlanUpdate: held as asked but for staged changes it is due (an extension's newer
	// version), made as its rollout allows (Why: each change).
	PlanUpdate = string(ports.ActUpdate)
	// PlanIncomplete: held as the backend makes it, but without something its entry asks for
	// that the backend does not make for it (Why: each thing it lacks). Nothing a pass does
	// mends it; the plan names it, so that a consumer missing its extension is never as asked.
	PlanIncomplete = "incomplete"
)

// Planned is what a pass would do for one consumer.
type Planned struct {
	// As is the consumer's login.
	As string `json:"as"`
	// Act is a ports.Act's word: create, adopt, repair, refuse, update, withdraw, drop or wait;
	// "" (ports.ActNone) where nothing is to be done. A string, as it is printed and encoded.
	Act string `json:"act"`
	// Why says what makes the act, in words an operator reads: what drifted, what adoption
	// changes, why it is refused, why a withdrawal waits.
	Why []string `json:"why,omitempty"`
	// At is when a withdrawal or a drop is due; zero: on the next pass.
	At time.Time `json:"at,omitzero"`
	// Held is set where a withdrawal is held as part of a mass withdrawal.
	Held bool `json:"held,omitempty"`
	// Earliest is set where At (the next pass, where zero) is the earliest a drop can come:
	// reckoned from the record's time, as for the daemon that withdrew it; a daemon that first
	// saw the withdrawal later, or whose clock says less time has passed than the wall clock
	// (stepped forward), waits the delay from its own sight of it (its /status says when).
	Earliest bool `json:"earliest,omitempty"`
}

// Preview is what a pass would do, per consumer: those the file lists in its order, then the
// others the backend's record holds, by login.
type Preview struct {
	Consumers []Planned `json:"consumers"`
	// BadEntries counts entries of the file that could not be read: while there are any,
	// nothing is withdrawn.
	BadEntries int `json:"bad_entries,omitempty"`
	// MassWithdrawal is set where the withdrawals would be held as a mass withdrawal.
	MassWithdrawal bool `json:"mass_withdrawal,omitempty"`
}

// Pending is whether any consumer is not as the file asks: something is to be done, waits, or
// is refused.
func (p Preview) Pending() bool {
	for _, c := range p.Consumers {
		if c.Act != "" {
			return true
		}
	}
	return false
}

// Preview says what a pass would do now, and changes nothing: it reads the file and the secrets
// as a pass does, reads the backend's record, asks the backend what each listed consumer's
// create would do, and decides each withdrawal with the pass's rules. It is made on a Harness of
// its own, which has run no pass; with Config.Once, a mass withdrawal's settle counts from the
// file's last change, as for a daemon that has run since then. Its error says why it could not
// say: the file unusable, the backend's record unreadable, or a consumer the backend could not
// be asked about.
func (h *Harness) Preview(ctx context.Context) (Preview, error) {
	// The inputs, as a pass reads them.
	given, ok := h.readContributions()
	if !ok {
		return Preview{}, errors.New(h.file.warning)
	}
	h.takeListing(given)
	items := h.readSecrets(given)

	// The record: what is managed, and the backend as a whole.
	var r Report
	if !h.readRecord(ctx, &r) {
		return Preview{}, errors.New(r.ServerProblem)
	}

	// What each listed consumer's create would do.
	out := Preview{BadEntries: h.file.bad}
	planned, err := h.foresee(ctx, items)
	if err != nil {
		return Preview{}, err
	}
	out.Consumers = planned

	// What becomes of those the file no longer lists.
	others, mass := h.previewLeaving()
	out.Consumers, out.MassWithdrawal = append(out.Consumers, others...), mass
	return out, nil
}

// foresee is, in the file's order, what a pass would do for each listed consumer.
func (h *Harness) foresee(ctx context.Context, items []*item) ([]Planned, error) {
	out := make([]Planned, len(items))
	var ps []ports.Provision
	var asked []int
	for i, it := range items {
		out[i].As = it.g.As
		switch {
		case it.unreadable != nil:
			out[i].Act, out[i].Why = PlanWait, []string{"secret unreadable (" + it.g.Secret + "): " + h.scrubbed(it.c, it.unreadable)}
		case it.refused != nil:
			out[i].Act, out[i].Why = PlanWait, []string{"secret refused (" + it.g.Secret + "): " + h.scrubbed(it.c, it.refused)}
		default:
			ps, asked = append(ps, it.provision()), append(asked, i)
		}
	}
	if len(ps) == 0 {
		return out, nil
	}
	seen := h.backend.Foresee(ctx, ps, h.cfg.HoldsTimeout)
	for k, f := range seen {
		i := asked[k]
		c := items[i].c
		if f.Err != nil {
			return nil, fmt.Errorf("could not ask the backend about %s: %s", c.as, h.scrubbed(c, f.Err))
		}
		out[i].Act = string(f.Act)
		for _, why := range f.Why {
			out[i].Why = append(out[i].Why, h.scrubbed(c, errors.New(why)))
		}
		planUpdates(&out[i], f, h.cfg.Updates == Off)
		if len(f.Lacks) > 0 && out[i].Act == string(ports.ActNone) {
			out[i].Act = PlanIncomplete
		}
		for _, lack := range f.Lacks {
			out[i].Why = append(out[i].Why, "lacks "+h.scrubbed(c, errors.New(lack)))
		}
	}
	return out, nil
}

// previewLeaving is what a pass would do, by login, for each consumer the record holds and the
// file no longer lists, and whether their withdrawal is held as a mass withdrawal. A recorded
// withdrawal counts from the record's time, as for the daemon that wrote it.
func (h *Harness) previewLeaving() ([]Planned, bool) {
	for _, c := range h.consumers.by {
		if c.recorded && c.record.Withdrawn && !c.record.Since.IsZero() {
			c.leave().seenWithdrawn = c.record.Since
		}
	}
	now := h.clock.Now()
	leaving := h.planLeaving()
	need, mass := h.hold(leaving)
	withdrawAt := now
	if h.settled(mass) < need {
		withdrawAt = h.withdrawalDue(mass)
	}
	var out []Planned
	seen := map[*consumer]bool{}
	for _, it := range leaving {
		c := it.c
		seen[c] = true
		p := Planned{As: c.as, Act: PlanWithdraw}
		if it.act == drop {
			p.Act = PlanDrop
		}
		if !it.active {
			// Withdrawn for the drop delay by its record's time: dropped on the next pass of a
			// daemon that has itself seen it withdrawn that long. One that first saw it later
			// (started since, or its clock stepped) waits the delay from then: its /status says.
			p.Why = []string{fmt.Sprintf("withdrawn %s ago by its record; a daemon drops it once it has seen it withdrawn for %s",
				withdrawnFor(c, now).Round(time.Second), h.cfg.DropAfter)}
			p.Earliest = true
			out = append(out, p)
			continue
		}
		switch {
		case h.file.bad > 0:
			p.Why = []string{fmt.Sprintf("waits: %d entry(ies) of %s cannot be read, and nothing is withdrawn until every one can",
				h.file.bad, h.cfg.Receives)}
		case withdrawAt.After(now):
			p.At, p.Held = withdrawAt, mass
			p.Why = []string{fmt.Sprintf("waits for %s to stay unchanged for %s", h.cfg.Receives, need)}
		}
		if it.act == withdraw && h.cfg.OnWithdraw == Drop {
			p.Why = append(p.Why, fmt.Sprintf("dropped %s after its withdrawal", h.cfg.DropAfter))
		}
		out = append(out, p)
	}
	for _, c := range h.consumers.by {
		if c.listed || seen[c] || !c.recorded || !c.record.Withdrawn {
			continue
		}
		p := Planned{As: c.as, Why: []string{"withdrawn; its data is kept"}}
		if h.cfg.OnWithdraw == Drop && !c.record.Since.IsZero() {
			p.Act, p.At, p.Why, p.Earliest = PlanDrop, at(dropDue(c, h.cfg.DropAfter, now), now), nil, true
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].As < out[j].As })
	return out, mass && len(leaving) > 0 && withdrawAt.After(now)
}
