// Foresee: what Create would do, found without changing anything, the plan's question. The
// rules are Create's own (creatable, anothers, claim, notHandedOver) and the changes are the
// check's (its comparison, read typed), so that a plan says what a pass does, never a second
// idea of it.

package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/novox/postgres-provider/ports"
)

// Foresee answers, in the order of ps, what Create would do for each, and changes nothing: the
// roles and databases are read in one read-only transaction (no lock is taken, not even the
// consumer's advisory lock, and nothing is written, not even the record), then the consumers
// the provider may take are checked as HoldsAll checks them. each bounds the reading of one
// consumer, and each check. A consumer Create would refuse is answered with the reason its
// error would give.
func (b *Backend) Foresee(ctx context.Context, ps []ports.Provision, each time.Duration) []ports.Foresight {
	out := make([]ports.Foresight, len(ps))
	wants := make([]wanted, len(ps))
	valid := make([]int, 0, len(ps))
	for i, p := range ps {
		w, err := b.creatable(p)
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
	looks, err := b.lookAt(ctx, wants, valid, each)
	if err != nil {
		for _, i := range valid {
			out[i].Err = fmt.Errorf("look at %s: %w", wants[i].role, err)
		}
		return out
	}
	var check []int // the roles that exist and Create may take: what a check says decides
	adopting := map[int]bool{}
	for k, i := range valid {
		w, l := wants[i], looks[k]
		switch {
		case l.refusal != nil:
			out[i] = ports.Foresight{Act: ports.ActRefuse, Why: []string{l.refusal.Error()}}
		case !l.role:
			why := []string{"role " + w.role}
			if !l.database {
				why = append(why, "database "+w.database)
			}
			out[i] = ports.Foresight{Act: ports.ActCreate, Why: why}
		default:
			adopting[i] = l.adopt
			check = append(check, i)
		}
	}
	checked := make([]ports.Provision, len(check))
	for k, i := range check {
		checked[k] = ps[i]
		checked[k].Login = true // what Create would do turns on the password too
	}
	for k, a := range b.check(ctx, checked, each, nil) {
		i := check[k]
		switch {
		case a.Err != nil:
			out[i].Err = a.Err
		case adopting[i]:
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
	b.refuseClashes(ps, out)
	b.vetAll(ctx, wants, out, each)
	return out
}

// vetAll refuses, of the consumers out says would be made or are held, one whose settings
// Create would refuse (vetSettings), in the words its error would give.
func (b *Backend) vetAll(ctx context.Context, wants []wanted, out []ports.Foresight, each time.Duration) {
	var conn *pgxpool.Conn
	for i, f := range out {
		if f.Err != nil || f.Act == ports.ActRefuse || len(wants[i].settings) == 0 {
			continue
		}
		err := func() error {
			ctx, cancel := context.WithTimeout(ctx, each)
			defer cancel()
			if conn == nil {
				c, err := b.pool.Acquire(ctx)
				if err != nil {
					return b.connectError(err)
				}
				conn = c
			}
			return vetSettings(ctx, conn, wants[i])
		}()
		switch {
		case err == nil:
		case errors.Is(err, ports.ErrInvalid), errors.Is(err, ports.ErrRefused):
			out[i] = ports.Foresight{Act: ports.ActRefuse, Why: []string{settingsError(wants[i], err).Error()}}
		default:
			out[i].Err = fmt.Errorf("look at %s: %w", wants[i].role, err)
		}
	}
	if conn != nil {
		conn.Release()
	}
}

// refuseClashes refuses, of the consumers out says would be made, one asking for the database
// of an earlier one, before any call, as the loop refuses it (Clashes).
func (b *Backend) refuseClashes(ps []ports.Provision, out []ports.Foresight) {
	var making []int
	for i, f := range out {
		if f.Err == nil && f.Act == ports.ActCreate {
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

// look is what Create would find of one consumer before it writes anything: its role and its
// database, whether it would adopt the role, and, where it would refuse, its error.
type look struct {
	observed
	adopt   bool
	refusal error
}

// lookAt reads, for each consumer of wants that index names, what Create reads first (its
// role's facts and its database's) and decides with Create's rule (anothers, claim, notHandedOver), in
// one read-only transaction that is rolled back.
func (b *Backend) lookAt(ctx context.Context, wants []wanted, index []int, each time.Duration) ([]look, error) {
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return nil, b.connectError(err)
	}
	defer conn.Release()
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	looks := make([]look, len(index))
	for k, i := range index {
		w, l := wants[i], &looks[k]
		cctx, cancel := context.WithTimeout(ctx, each)
		l.observed, err = b.observe(cctx, tx, w.role, w.database, reading{verifier: true, holdings: true})
		if taken := b.anothers(l.observed, w.role); err == nil && taken != nil {
			l.refusal = fmt.Errorf("create database %s: %w", w.database, taken)
		} else if err == nil {
			var refusal error
			switch _, l.adopt, refusal = b.claim(cctx, tx, w, l.observed); {
			case refusal != nil && (cctx.Err() != nil || conn.Conn().IsClosed()):
				err = refusal // the question could not be asked
			case refusal != nil:
				l.refusal = fmt.Errorf("create role %s: %w", w.role, refusal)
			default:
				if refused := b.notHandedOver(l.observed, w.role); refused != nil {
					l.refusal = fmt.Errorf("create database %s: %w", w.database, refused)
				}
			}
		}
		cancel()
		if err != nil {
			return nil, err
		}
	}
	return looks, nil
}
