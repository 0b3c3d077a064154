// Foresee: what Create would do, found without changing anything, the plan's question. The
// verdict is Create's own (decide, on the same observation but for what a role holds, read only
// of a role it may adopt) and the changes are the check's (its comparison, read typed), so
// that a plan says what a pass does, never a second idea of it.

package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/novox/postgres-provider/ports"
)

// Foresee answers, in the order of ps, what Create would do for each, and changes nothing: the
// roles and databases are read, all in one round trip, the settings tried and the verdicts
// reached in one read-only transaction (no lock is taken, not even the consumer's advisory
// lock, and nothing is written, not even the record), then the consumers the provider may take
// are weighed, on what was read, as HoldsAll checks them, but past the drift a check stops at
// where they name extensions (weigh): each consumer is read once. each bounds the reading, the
// trial of each consumer's settings, and each check. A consumer Create would refuse is
// answered with the reason its error would give; where Create would refuse inside its
// database, with what it lacks, but not the updates it would not make.
func (b *Backend) Foresee(ctx context.Context, ps []ports.Provision, each time.Duration) []ports.Foresight {
	out := make([]ports.Foresight, len(ps))
	wants := make([]wanted, len(ps))
	valid := make([]int, 0, len(ps))
	for i, p := range ps {
		w, err := b.rules.creatable(p)
		if err != nil {
			out[i] = ports.Foresight{Act: ports.ActRefuse, Why: []string{err.Error()}}
			continue
		}
		wants[i] = w
		valid = append(valid, i)
	}
	if len(valid) == 0 {
		return out
	}
	s := b.stance() // one reading of the mode for the whole plan
	looks, err := b.lookAt(ctx, s, wants, valid, each)
	if err != nil {
		for _, i := range valid {
			out[i].Err = fmt.Errorf("look at %s: %w", wants[i].role, err)
		}
		return out
	}
	var check []int // the roles Create may take or make: what a check says decides
	for _, i := range valid {
		w, l := wants[i], looks[i]
		switch {
		case l.err != nil:
			out[i].Err = fmt.Errorf("look at %s: %w", w.role, l.err)
		case l.act == ports.ActRefuse:
			out[i] = ports.Foresight{Act: ports.ActRefuse, Why: []string{l.refusal.Error()}}
		case l.act == ports.ActCreate:
			why := []string{"role " + w.role}
			if !l.database {
				why = append(why, "database "+w.database)
			}
			out[i] = ports.Foresight{Act: ports.ActCreate, Why: why}
			if len(w.extensions) > 0 { // what it would lack, or Create refuse to make there
				check = append(check, i)
			}
		default:
			check = append(check, i)
		}
	}
	asked := slices.Clone(ps)
	seen := make([]observed, len(check))
	for k, i := range check {
		asked[i].Login = true // what Create would do turns on the password too
		seen[k] = looks[i].observed
	}
	found := make([]checked, len(ps))
	_, _, named := asking(wants, check)
	available, err := b.availableWithin(ctx, each, named)
	if err != nil { // one cause for all it weighs: as a check says it
		for _, i := range check {
			found[i].Err = askedErr(wants[i].role, err)
		}
	} else {
		b.weigh(ctx, s, asked, wants, check, seen, available, each, func(int) {}, true, found)
	}
	for _, i := range check {
		a := found[i]
		switch {
		case a.Err != nil && looks[i].act != ports.ActCreate: // one to be made is said as looked at
			out[i].Err = a.Err
		case a.refusal != nil: // what Create refuses inside its database (or the one it makes), in its words, and what it lacks
			out[i] = ports.Foresight{Act: ports.ActRefuse, Why: []string{a.refusal.Error()}, Lacks: a.Lacks}
			continue
		case looks[i].act == ports.ActCreate: // as looked at; what it would lack follows
		case looks[i].act == ports.ActAdopt:
			out[i] = ports.Foresight{Act: ports.ActAdopt, Why: define(wants[i], b.resource).adoptionWords(a.changes)}
		case len(a.changes) == 0:
			out[i] = ports.Foresight{Act: ports.ActNone}
		default:
			out[i] = ports.Foresight{Act: ports.ActRepair, Why: words(a.changes)}
		}
		if a.Err == nil {
			out[i].Updates, out[i].Kept, out[i].Lacks = a.Updates, a.Kept, a.Lacks
		}
	}
	b.refuseClashes(ps, out, looks)
	return out
}

// refuseClashes refuses, of the consumers whose role Create would make (looks' fresh), one
// asking for the database of an earlier one, whatever else it would say, as the loop refuses
// it before any call (Clashes).
func (b *Backend) refuseClashes(ps []ports.Provision, out []ports.Foresight, looks []look) {
	var making []int
	for i, f := range out {
		if f.Err == nil && looks[i].fresh {
			making = append(making, i)
		}
	}
	made := make([]ports.Provision, len(making))
	for k, i := range making {
		made[k] = ps[i]
	}
	for k, err := range b.Clashes(made) {
		if err != nil {
			out[making[k]] = ports.Foresight{Act: ports.ActRefuse, Why: []string{err.Error()}}
		}
	}
}

// look is what Create would find of one consumer before it writes anything, and its verdict
// (judged, as Create judges it): fresh where Create would make its role (or would, but for its
// settings); err where its settings could not be tried.
type look struct {
	judged
	fresh bool
	err   error
}

// lookAt observes the consumers of wants that index names, all in one round trip (catalog, as
// a plan reads them: forPlan, within each); reads again, alone, one whose verdict weighs what
// its role holds (weighsHoldings: a role the provider may adopt), as Create reads it; tries
// each one's settings and reaches Create's verdict (decide), as a provider standing as s, each
// within each, in one read-only transaction that is rolled back. Its looks are in the order
// of wants; those index does not name are empty. The record a look's verdict names is not
// Create's where the role owns databases it was not read for: a plan does not say it.
func (b *Backend) lookAt(ctx context.Context, s stance, wants []wanted, index []int, each time.Duration) ([]look, error) {
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return nil, b.reach.connectError(err)
	}
	defer conn.Release()
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	roles, databases, _ := asking(wants, index)
	cctx, cancel := context.WithTimeout(ctx, each)
	seen, _, err := catalog(cctx, tx, false, forPlan, s.readsVerifiers, roles, databases, nil)
	cancel()
	if err != nil {
		return nil, err
	}
	looks := make([]look, len(wants))
	for k, i := range index {
		d, o, l := define(wants[i], b.resource), seen[k], &looks[i]
		cctx, cancel := context.WithTimeout(ctx, each)
		if d.weighsHoldings(o, s) {
			if o, err = observe(cctx, tx, s.powers, d.role, d.database, forVerdict); err != nil {
				cancel()
				return nil, err
			}
		}
		j, tried := judgeSeen(cctx, tx, d, s, o, &b.verified, "") // as Create judges it, but for the password
		cancel()
		if l.judged, l.err = j, tried; tried != nil {
			continue
		}
		butSettings := l.verdict // what it would be but for its settings: a clash comes first
		if l.vet != nil {
			butSettings = d.decide(l.observed, s, nil)
		}
		l.fresh = butSettings.act == ports.ActCreate
	}
	return looks, nil
}
