// Create: one consumer's role, database and extensions brought into being, or back to
// exactly what it asks for, under its lock.

package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/novox/postgres-provider/ports"
)

// Create brings the consumer's role, database and extensions into being, or back to exactly
// what p says, and answers what it did. Every name is checked before the first statement.
// Creates of one consumer, from this process or another provider on the same server, are
// serialised by an advisory lock. A create any step refuses answers ActRefuse.
func (b *Backend) Create(ctx context.Context, p ports.Provision) (ports.Act, error) {
	w, err := b.rules.creatable(p)
	if err != nil {
		return ports.ActRefuse, err
	}
	d := define(w, b.resource)
	s := b.stance() // one reading of the provider's mode, for all of this create
	var did ports.Act
	var told facts // what each step found to be said, told once the step is done
	err = b.locks.locked(ctx, w.role, s.powers, func(ctx context.Context, conn *pgxpool.Conn) error {
		// Observed once, and decided before anything is made (decide): a refusal makes nothing.
		f, v, act, err := b.ensureRole(ctx, conn, d, s, p.Password, &told)
		b.voice.tell(&told)
		if did = act; err != nil {
			return err
		}
		f, cs, made, err := b.ensureDatabase(ctx, conn, d, s, f, v.changes, &told)
		b.voice.tell(&told)
		if err != nil {
			return atDatabase(w.database, err)
		}
		added, lacks, extErr := b.ext.ensureExtensions(ctx, conn, w, s.powers, p.Updates, f.searchPath, &told)
		b.voice.tell(&told)
		if extErr == nil && len(lacks) > 0 {
			extErr = &ports.Incomplete{Lacks: lacks} // the rest of the create stands; said after the settings
		}
		var failed *ports.UpdateFailed
		var incomplete *ports.Incomplete
		if extErr != nil && !errors.As(extErr, &failed) && !errors.As(extErr, &incomplete) { // a failed update's script, or what it lacks: the rest of the create stands
			if (made || added) && did == ports.ActNone {
				did = ports.ActRepair
			}
			return extErr
		}
		set, err := writeSettings(ctx, conn, d, cs)
		if (made || added || set) && did == ports.ActNone {
			did = ports.ActRepair
		}
		if err != nil {
			return settingsError(w.role, w.database, err)
		}
		return extErr
	})
	if ports.IsRefusal(err) {
		did = ports.ActRefuse // whichever step refused it, the act Foresee names
	}
	return did, err
}
