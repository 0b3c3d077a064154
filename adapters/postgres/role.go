// A consumer's role: made, altered or adopted as the definition (standing.go) says, its
// password sent as a verifier that no log sees; and what Create, Remove and Drop read of it first.

package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/novox/postgres-provider/adapters/postgres/scram"
	"github.com/novox/postgres-provider/ports"
)

// ensureRole creates the role, or brings it back to the definition (standing.go) under the
// minted password, its memberships either way revoked, and records it as managed and active,
// in one transaction: a crash never leaves a role of the provider's unrecorded. The transaction keeps its statements out of the server's log, even if
// they fail, and out of pg_stat_statements. A role that exists is altered only where it is the
// provider's (the record says so, on this very role) or is exactly what the provider would have
// made (unadoptable says why not); its password is rewritten only where the
// stored verifier does not verify against the minted one, and nothing is written where nothing
// differs. It answers what it did: made the role, adopted it, repaired it (wrote something), or
// nothing.
func (b *Backend) ensureRole(ctx context.Context, conn *pgxpool.Conn, w wanted, password string) (did ports.Act, err error) {
	var made, adopted, changed bool
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, quietSQL(b.delegated()))
		if err != nil {
			return err
		}
		f, err := b.observe(ctx, tx, w.role, "", reading{verifier: true, holdings: true})
		if err != nil {
			return err
		}
		had, adopt, err := b.claim(ctx, tx, w, f)
		if err != nil {
			return err
		}
		made, adopted = !f.role, adopt
		f.verifies = f.stored != nil && b.verified.verifies(*f.stored, password, w.role)
		d := define(w, b.resource)
		var cs []change
		if f.role {
			cs = d.roleChanges(f)
		}
		if hasKind(cs, memberOf, grantedTo) {
			changed = true
			if err := b.revokeMemberships(ctx, tx, w.role); err != nil {
				return err
			}
		}
		if !f.role || hasKind(cs, loginOff, powersOn, roleExpired, roleValidUntil, limitDiffers, passwordStale) {
			var verifier string
			if !f.verifies {
				if verifier, err = scram.Verifier(password, sessionIterations(conn.Conn().PgConn())); err != nil {
					return err
				}
			}
			changed = true
			if err := b.writeRole(ctx, tx, f.role, w, verifier); err != nil {
				return err
			}
		}
		if err := b.ownMembership(ctx, tx, w.role); err != nil {
			return err
		}
		if want := d.record(had, f.owns); adopted || !sameRecord(had, want) {
			changed = true
			return setRecord(ctx, tx, w.role, want)
		}
		return nil
	})
	if err == nil && adopted {
		b.say(slog.LevelWarn, w.role, "%s: adopted the existing role %s, a plain login role the provider did not make: "+
			"it now has the minted password and is managed like any other", w.role, w.role)
	}
	return actOf(made, adopted, changed), err
}

// claim is the rule of what Create may take: a role that does not exist (made), one whose
// record on it is this provider's (had), or one in no record that adoption lets the provider
// take over (adopt); any other is refused, and the error says why. Create and Foresee both ask
// it, in their transactions (q), so that a plan refuses exactly what a pass would.
func (b *Backend) claim(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, w wanted, f observed) (had record, adopt bool, err error) {
	if !f.role {
		// A role of the provider's renamed away keeps its record, which names this login: the
		// consumer is that role, and is not made a second time beside it.
		other, err := b.renamedTo(ctx, q, w.role)
		if err != nil || other == "" {
			return record{}, false, err
		}
		return record{}, false, refused(fmt.Errorf("%s is now the role %s (renamed; %s carries the provider's record of %s); it is "+
			"not made again beside it: rename it back (ALTER ROLE %s RENAME TO %s), or take the record off %s (COMMENT ON ROLE %s "+
			"IS NULL) to have %s made anew", w.role, other, other, w.role, ident(other), ident(w.role), other, ident(other), w.role))
	}
	had, err = b.ours(w.role, f)
	switch {
	case errors.Is(err, errNotRecorded) && b.adopt == AdoptNone:
		return record{}, false, refused(fmt.Errorf("role %s exists and the provider did not make it; it is not taken over (adoption is off)", w.role))
	case errors.Is(err, errNotRecorded):
		if why := unadoptable(f, w.database); why != "" {
			return record{}, false, refused(fmt.Errorf("role %s exists, the provider did not make it, and it is %s; it is not taken over", w.role, why))
		}
		if err := b.mayAdminister(ctx, q, w.role); err != nil {
			return record{}, false, err
		}
		return record{}, true, nil
	}
	return had, false, err
}

// renamedTo is the role, not named role, that carries this provider's record of role (role was
// renamed to it, or the record copied there), "" where none does. The record names its login as
// JSON ("login":"<role>"), which a login's letters never need escaped: the server finds the few
// candidates, and each is read as a record here.
func (b *Backend) renamedTo(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, role string) (string, error) {
	var names, comments []string
	err := q.QueryRow(ctx, `SELECT coalesce(array_agg(r.rolname::text ORDER BY r.rolname), '{}'),
       coalesce(array_agg(d.description ORDER BY r.rolname), '{}')
FROM pg_catalog.pg_shdescription d JOIN pg_catalog.pg_roles r ON r.oid = d.objoid
WHERE d.classoid = 'pg_catalog.pg_authid'::pg_catalog.regclass AND starts_with(d.description, $1)
  AND pg_catalog.strpos(d.description, $2) > 0 AND r.rolname <> $3`,
		recordPrefix, `"login":"`+role+`"`, role).Scan(&names, &comments)
	if err != nil {
		return "", fmt.Errorf("look for the record of %s on another role: %w", role, err)
	}
	for i, name := range names {
		if r, ok := parseRecord(&comments[i]); ok && r.Resource == b.resource && r.Login == role && r.V <= recordVersion {
			return name, nil
		}
	}
	return "", nil
}

// actOf is what ensureRole did: made the role, adopted it, changed it, or nothing.
func actOf(made, adopted, changed bool) ports.Act {
	switch {
	case made:
		return ports.ActCreate
	case adopted:
		return ports.ActAdopt
	case changed:
		return ports.ActRepair
	}
	return ports.ActNone
}

// quietSQL keeps the role's transaction, which may carry a verifier, out of the server's log
// (statements, errors, samples), pg_stat_activity (and so deadlock reports) and
// pg_stat_statements: local to the transaction (is_local true), and a statement of its own
// before the one with the verifier, as the server reports a statement as it starts it.
// pg_stat_statements' setting is a placeholder where the extension is not loaded. These are a
// superuser's settings: a provider that is not one sets none, and sends the verifier as a
// parameter instead (writeRole), on a server whose settings would not log it (quiet).
func quietSQL(delegated bool) string {
	if delegated {
		return "SELECT 1"
	}
	return `SELECT set_config('log_statement', 'none', true),
       set_config('log_min_error_statement', 'panic', true),
       set_config('log_min_duration_statement', '-1', true),
       set_config('log_min_duration_sample', '-1', true),
       set_config('log_statement_sample_rate', '0', true),
       set_config('track_activities', 'off', true),
       set_config('debug_print_parse', 'off', true),
       set_config('debug_print_rewritten', 'off', true),
       set_config('debug_print_plan', 'off', true),
       set_config('pg_stat_statements.track_utility', 'off', true)`
}
