// Create: one consumer's role, database and extensions brought into being, or back to
// exactly what it asks for, under its lock: observed once, judged once (decide.go), and the
// verdict written (apply.go).

package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/novox/postgres-provider/ports"
)

// Create brings the consumer's role, database and extensions into being, or back to exactly
// what p says, and answers what it did. Every name is checked before the first statement.
// Creates of one consumer, from this process or another provider on the same server, are
// serialised by an advisory lock. The consumer is judged as Foresee judges it (judge: its role
// and its database observed, its settings tried in a savepoint rolled back, its password
// checked, the verdict reached) in the transaction that then writes its role (roleTxSQL keeps
// it out of every log): a refusal writes nothing, and answers ActRefuse, as does a create any
// later step refuses. s is how the provider stands, taken once for the whole create.
func (b *Backend) Create(ctx context.Context, p ports.Provision) (ports.Act, error) {
	w, err := b.rules.creatable(p)
	if err != nil {
		return ports.ActRefuse, err
	}
	d := define(w, b.resource)
	s := b.stance() // one reading of the provider's mode, for all of this create
	var j judged
	wrote := false // whether the create wrote anything
	var told facts // what each step found to be said, told once the step is done
	err = b.locks.locked(ctx, w.role, s.powers, func(ctx context.Context, conn *pgxpool.Conn) error {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, roleTxSQL(s.quiets)); err != nil {
				return atRole(d.role, err)
			}
			var read, tried, err error
			switch j, read, tried = judge(ctx, tx, d, s, &b.verified, p.Password); {
			case read != nil:
				return atDatabase(d.database, read)
			case tried != nil:
				return settingsError(d.role, d.database, tried)
			case j.refusal != nil:
				return j.refusal
			}
			if wrote, err = b.writeVerdict(ctx, tx, d, j, s.powers, p.Password, &told); err != nil {
				return atRole(d.role, err)
			}
			return nil
		})
		if err == nil && j.act == ports.ActAdopt { // said once it is committed
			told.did(d.role, "%s: adopted the existing role %s, a plain login role the provider did not make: "+
				"it now has the minted password and is managed like any other", d.role, d.role)
		}
		b.voice.tell(&told)
		if err != nil { // a refusal among them
			return err
		}
		made, err := b.writeDatabase(ctx, conn, d, s, &j, &told)
		b.voice.tell(&told)
		if err != nil {
			return atDatabase(w.database, err)
		}
		added, lacks, extErr := b.ext.ensureExtensions(ctx, conn, w, s.powers, p.Updates, j.searchPath, &told)
		b.voice.tell(&told)
		wrote = wrote || made || added
		if extErr == nil && len(lacks) > 0 {
			extErr = &ports.Incomplete{Lacks: lacks} // the rest of the create stands; said after the settings
		}
		var failed *ports.UpdateFailed
		var incomplete *ports.Incomplete
		if extErr != nil && !errors.As(extErr, &failed) && !errors.As(extErr, &incomplete) { // a failed update's script, or what it lacks: the rest of the create stands
			return extErr
		}
		set, err := writeSettings(ctx, conn, d, j.changes)
		if wrote = wrote || set; err != nil {
			return settingsError(w.role, w.database, err)
		}
		return extErr
	})
	if ports.IsRefusal(err) {
		return ports.ActRefuse, err // whichever step refused it, the act Foresee names
	}
	return actOf(j.act, wrote), err
}

// actOf is what a create whose verdict was act did: refused it, made the role, adopted it,
// changed something (wrote), or nothing.
func actOf(act ports.Act, wrote bool) ports.Act {
	switch {
	case act == ports.ActRefuse || act == ports.ActCreate || act == ports.ActAdopt:
		return act
	case wrote:
		return ports.ActRepair
	}
	return ports.ActNone
}
