// A consumer's role: made, altered or adopted as the definition (standing.go) says, its
// password sent as a verifier that no log sees; and what Create, Remove and Drop read of it first.

package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/novox/postgres-provider/adapters/postgres/scram"
	"github.com/novox/postgres-provider/ports"
)

// ensureRole judges the consumer d as Foresee does (judge: its role and its database observed,
// its settings tried in a savepoint rolled back, its password checked, the verdict reached),
// and where the verdict lets it, creates the role or brings it back to the definition
// (standing.go) under the minted password, its memberships either way revoked, and records it
// as managed and active, in one transaction: a crash never leaves a role of the provider's
// unrecorded. The transaction keeps its statements out of the server's log, even if they fail,
// and out of pg_stat_statements. Its password is rewritten only where the stored verifier
// does not verify against the minted one, and nothing is written where nothing differs. It
// answers what it found, the verdict, and what it did: made the role, adopted it, repaired it
// (wrote something), or nothing; a refusal is the verdict's error, as it is. It adds to told
// what it found (a membership it may not revoke) and an adoption, said once it is committed. s is how the
// provider stands, taken once for the whole create: it decides and writes under it.
func (b *Backend) ensureRole(ctx context.Context, conn *pgxpool.Conn, d definition, s stance, password string, told *facts) (f observed, v verdict, did ports.Act, err error) {
	changed := false
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, roleTxSQL(s.quiets)); err != nil {
			return atRole(d.role, err)
		}
		j, read, tried := judge(ctx, tx, d, s, &b.verified, password)
		switch f, v = j.observed, j.verdict; {
		case read != nil:
			return atDatabase(d.database, read)
		case tried != nil:
			return settingsError(d.role, d.database, tried)
		case v.refusal != nil:
			return v.refusal
		}
		if changed, err = b.writeConsumerRole(ctx, tx, d, f, v, s.powers, password, told); err != nil {
			return atRole(d.role, err)
		}
		return nil
	})
	if v.refusal != nil {
		return f, v, ports.ActRefuse, err
	}
	if err == nil && v.act == ports.ActAdopt {
		told.did(d.role, "%s: adopted the existing role %s, a plain login role the provider did not make: "+
			"it now has the minted password and is managed like any other", d.role, d.role)
	}
	return f, v, actOf(v.act == ports.ActCreate, v.act == ports.ActAdopt, changed), err
}

// writeConsumerRole writes, in tx, what the verdict v on the consumer found as f takes, as a
// provider of powers p: the role made or altered to the definition d, memberships revoked, the
// provider's own membership and the record; it answers whether it wrote anything, and adds to
// told what it found to be said.
func (b *Backend) writeConsumerRole(ctx context.Context, tx pgx.Tx, d definition, f observed, v verdict, p powers, password string, told *facts) (bool, error) {
	changed, cs := false, v.changes
	if writes(cs, membershipWriter) {
		changed = true
		if err := b.revokeMemberships(ctx, tx, d.role, p.revokesAny, told); err != nil {
			return changed, err
		}
	}
	if !f.role || writes(cs, roleWriter) {
		var verifier string
		if !f.verifies {
			var err error
			if verifier, err = scram.Verifier(password, sessionIterations(tx.Conn().PgConn())); err != nil {
				return changed, err
			}
		}
		changed = true
		if err := writeRole(ctx, tx, f.role, d, p, verifier); err != nil {
			return changed, err
		}
	}
	if err := ownMembership(ctx, tx, d.role, p); err != nil {
		return changed, err
	}
	if want := d.record(v.had, f.owns); v.act == ports.ActAdopt || !sameRecord(v.had, want) {
		return true, setRecord(ctx, tx, d.role, want)
	}
	return changed, nil
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

// roleTxSQL opens the role's transaction: its statements planned once (sqlPlanOnce), and
// where the provider quiets the server (quiets), the transaction, which may carry a verifier,
// kept out of the server's log (statements, errors, samples), pg_stat_activity (and so deadlock
// reports) and pg_stat_statements: local to the transaction (is_local true), and a statement
// of its own before the one with the verifier, as the server reports a statement as it starts
// it. pg_stat_statements' setting is a placeholder where the extension is not loaded. These
// are a superuser's settings: a provider that is not one sets none of them, and sends the
// verifier as a parameter instead (writeRole), on a server whose settings would not log it
// (quiet).
func roleTxSQL(quiets bool) string {
	if !quiets {
		return sqlPlanOnce
	}
	return sqlPlanOnce + `,
       set_config('log_statement', 'none', true),
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
