package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ensureRole creates the role, or brings it back to the definition (standing.go) under the
// minted password, its memberships either way revoked, and records it as managed and active,
// in one transaction: a crash never leaves a role of the provider's unrecorded. The transaction keeps its statements out of the server's log, even if
// they fail, and out of pg_stat_statements. A role that exists is altered only where it is the
// provider's (the record says so, on this very role) or is exactly what the provider would have
// made (unadoptable says why not); its password is rewritten only where the
// stored verifier does not verify against the minted one, and nothing is written where nothing
// differs. It answers whether the role was adopted.
func (b *Backend) ensureRole(ctx context.Context, conn *pgxpool.Conn, pl plan, password string) (adopted bool, err error) {
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// Local to this transaction (is_local true), and a statement of its own before the one
		// with the verifier: the server reports a statement to pg_stat_activity (and so to a
		// deadlock report) as it starts it. pg_stat_statements' setting is a placeholder where
		// the extension is not loaded.
		_, err := tx.Exec(ctx, `SELECT set_config('log_statement', 'none', true),
       set_config('log_min_error_statement', 'panic', true),
       set_config('log_min_duration_statement', '-1', true),
       set_config('log_min_duration_sample', '-1', true),
       set_config('log_statement_sample_rate', '0', true),
       set_config('track_activities', 'off', true),
       set_config('debug_print_parse', 'off', true),
       set_config('debug_print_rewritten', 'off', true),
       set_config('debug_print_plan', 'off', true),
       set_config('pg_stat_statements.track_utility', 'off', true)`)
		if err != nil {
			return err
		}
		f, err := factsOf(ctx, tx, pl.role)
		if err != nil {
			return err
		}
		var had record
		if f.exists {
			had, err = b.ours(pl.role, f)
			switch {
			case errors.Is(err, errNotRecorded) && b.adopt == AdoptNone:
				return refused(fmt.Errorf("role %s exists and the provider did not make it; it is not taken over (adoption is off)", pl.role))
			case errors.Is(err, errNotRecorded):
				if why := unadoptable(f.standing, f.held, pl.database); why != "" {
					return refused(fmt.Errorf("role %s exists, the provider did not make it, and it is %s; it is not taken over", pl.role, why))
				}
				adopted = true
			case err != nil:
				return err
			}
		}
		if f.memberships() {
			if err := revokeMemberships(ctx, tx, pl.role); err != nil {
				return err
			}
		}
		verifies := f.stored != nil && b.verified.verifies(*f.stored, password, pl.role)
		if !f.exists || !f.asMade() || f.limit != pl.limit || !verifies {
			secret := ""
			if !verifies {
				verifier, err := scramVerifier(password)
				if err != nil {
					return err
				}
				secret = " PASSWORD " + literal(verifier)
			}
			if _, err = tx.Exec(ctx, roleDDL(f.exists, pl.role, pl.limit, secret)); err != nil {
				return err
			}
		}
		// The databases the provider made for the consumer before (and that the role still
		// owns) stay in its record beside the one it asks for now: a drop takes them all.
		databases := []string{pl.database}
		for _, db := range had.databases(pl.role) {
			if slices.Contains(f.held.databases, db) && !slices.Contains(databases, db) {
				databases = append(databases, db)
			}
		}
		slices.Sort(databases)
		want := record{V: recordVersion, Login: pl.role, Resource: b.resource, Database: pl.database, Databases: databases,
			Derived: pl.derived, State: active}
		if adopted || !sameRecord(had, want) {
			return setRecord(ctx, tx, pl.role, want)
		}
		return nil
	})
	if err == nil && adopted {
		b.say(slog.LevelWarn, pl.role, "%s: adopted the existing role %s, a plain login role the provider did not make: "+
			"it now has the minted password and is managed like any other", pl.role, pl.role)
	}
	return adopted, err
}

// sameRecord is whether two records say the same.
func sameRecord(a, b record) bool {
	return a.V == b.V && a.Login == b.Login && a.Resource == b.Resource && a.Database == b.Database &&
		slices.Equal(a.Databases, b.Databases) && a.State == b.State && a.Since == nil && b.Since == nil &&
		(len(a.Derived) == 0 && len(b.Derived) == 0 || reflect.DeepEqual(a.Derived, b.Derived))
}
