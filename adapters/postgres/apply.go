// The writer: what Create changes on the server, as SQL, each statement for the changes a
// verdict names (decide.go, its changes the comparison's: compare.go) or for a role or
// database being made.

package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/novox/postgres-provider/adapters/postgres/scram"
)

// writeVerdict writes, in tx (opened by roleTxSQL), what the verdict on the consumer d, judged
// as j, takes of its role, as a provider of powers p: the role made or altered to the
// definition (standing.go) under the minted password, sent as a verifier and only where the
// stored one does not verify against it; its memberships either way revoked; the provider's
// own membership; and the record, where it differs, in one transaction, so that a crash never
// leaves a role of the provider's unrecorded. It answers whether it wrote anything, and adds
// to told what it found to be said (a membership it may not revoke).
func (b *Backend) writeVerdict(ctx context.Context, tx pgx.Tx, d definition, j judged, p powers, password string, told *facts) (bool, error) {
	changed := false
	if writes(j.changes, membershipWriter) {
		changed = true
		if err := b.revokeMemberships(ctx, tx, d.role, p.revokesAny, told); err != nil {
			return changed, err
		}
	}
	if !j.role || writes(j.changes, roleWriter) {
		var verifier string
		if !j.verifies {
			var err error
			if verifier, err = scram.Verifier(password, sessionIterations(tx.Conn().PgConn())); err != nil {
				return changed, err
			}
		}
		changed = true
		if err := writeRole(ctx, tx, j.role, d, p, verifier); err != nil {
			return changed, err
		}
	}
	if err := ownMembership(ctx, tx, d.role, p); err != nil {
		return changed, err
	}
	if j.record != nil {
		return true, setRecord(ctx, tx, d.role, *j.record)
	}
	return changed, nil
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

// writeDatabase makes the consumer d's database, owned by its role, where j (judged as s, its
// role written) found none, and writes what the verdict's changes take of it: a database owned
// by another role is never handed over. Nobody but its owner may connect to it, not even for a
// moment: it is made not accepting connections, PUBLIC loses CONNECT and TEMPORARY, and only
// then are connections allowed. Where others could connect, they can no longer, and their
// sessions in it are ended (a superuser's and the owner's stay). It is never a template, which
// anyone allowed to create databases could copy (one made here, closed until then, had nobody
// in it to end). The database is read again, and compared again, only where it is made: j then
// holds the observation and the changes as they stand after (the role's settings in the
// database among them: made here, it has none). It answers whether it changed anything, and
// adds to told what it did that the operator is told (sessions of others ended).
func (b *Backend) writeDatabase(ctx context.Context, conn *pgxpool.Conn, d definition, s stance, j *judged, told *facts) (changed bool, err error) {
	db, role := d.database, d.role
	madeClosed := false // made here, closed: nobody else is in it to end
	if !j.database {
		_, err := conn.Exec(ctx, "CREATE DATABASE "+ident(db)+" OWNER "+ident(role)+" ALLOW_CONNECTIONS false")
		madeClosed = err == nil
		if pgCode(err) == duplicateDatabase || madeMeanwhile(err) {
			err = nil // made by someone else since we looked; whose it is decides
		}
		if err != nil {
			return false, err
		}
		changed = true
		if j.observed, err = observe(ctx, conn, s.powers, role, db, reading{}); err != nil {
			return changed, err
		}
		if err := d.handedOver(j.observed); err != nil { // a CREATE DATABASE of another's may have won the race
			return changed, err
		}
		j.changes = nil
		if j.database { // dropped again meanwhile: nothing of it to write
			j.changes = d.databaseChanges(j.observed, s.powers)
		}
	}
	if writes(j.changes, databaseWriter) {
		changed = true
		if err := asOwner(ctx, conn, role, s.asMember, func(tx pgx.Tx) error { return closeAndOpen(ctx, tx, db, b.self, j.open, j.changes) }); err != nil {
			return changed, err
		}
	}
	if len(j.open) > 0 && !madeClosed {
		ended, err := terminate(ctx, conn, othersIn, db, role)
		if err != nil {
			return changed, fmt.Errorf("end the sessions of others: %w", err)
		}
		if len(ended) > 0 {
			told.did(role, "%s: the database %s was open to others (%v); no longer, and %d session(s) of others in it were ended",
				role, db, j.open, len(ended))
		}
	}
	return changed, nil
}

// madeMeanwhile is whether err is CREATE DATABASE meeting a database of that name made by a
// concurrent CREATE DATABASE after it looked: the catalog's unique index, not 42P04.
func madeMeanwhile(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == uniqueViolation && pgErr.ConstraintName == "pg_database_datname_index"
}

// roleDDL is the statement that makes role, or makes it again, as the definition says, with
// its connection limit and, where secret is not empty, its password (" PASSWORD '<verifier>'").
// A provider that is not a superuser names none of the attributes only a superuser may change
// (it cannot give them, and the server refuses even their absence): takesSuper is false.
func roleDDL(exists, takesSuper bool, role string, limit int, secret string) string {
	verb := "CREATE"
	if exists {
		verb = "ALTER"
	}
	super := ""
	if takesSuper {
		super = " NOSUPERUSER NOREPLICATION NOBYPASSRLS"
	}
	return verb + " ROLE " + ident(role) + " WITH LOGIN NOCREATEDB NOCREATEROLE" + super +
		" VALID UNTIL 'infinity' CONNECTION LIMIT " + strconv.Itoa(limit) + secret
}

// writeRole makes the role, or makes it again, as the definition d says, with its connection
// limit and, where verifier is not empty, that password, as a provider of powers p. A
// superuser (p.quiets) sends the verifier in
// the statement, on a transaction roleTxSQL kept out of every log. A provider that is not one
// cannot quiet the server: it sends the verifier as a parameter of a function of its session's
// own (pg_temp), so that the statement the server sees, logs at the ddl level and shows in
// pg_stat_activity names no verifier, and an error inside it is raised again without the
// statement it came from.
func writeRole(ctx context.Context, tx pgx.Tx, exists bool, d definition, p powers, verifier string) error {
	if p.quiets {
		secret := ""
		if verifier != "" {
			secret = " PASSWORD " + literal(verifier)
		}
		_, err := tx.Exec(ctx, roleDDL(exists, p.takesSuperAttributes, d.role, d.limit, secret))
		return err
	}
	if _, err := tx.Exec(ctx, roleDDL(exists, p.takesSuperAttributes, d.role, d.limit, "")); err != nil {
		return err
	}
	if verifier == "" {
		return nil
	}
	if _, err := tx.Exec(ctx, `CREATE OR REPLACE FUNCTION pg_temp.novox_password(role text, verifier text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE pg_catalog.format('ALTER ROLE %I PASSWORD %L', role, verifier);
EXCEPTION WHEN OTHERS THEN
    RAISE EXCEPTION USING MESSAGE = SQLERRM, ERRCODE = SQLSTATE;
END
$$`); err != nil {
		return fmt.Errorf("make the function that sets a password: %w", err)
	}
	_, err := tx.Exec(ctx, "SELECT pg_temp.novox_password($1, $2)", d.role, verifier)
	return err
}

// revokeMemberships revokes, in tx, every grant that makes role a member of another role or
// another role a member of it: each grantor's (PostgreSQL 16 keeps one per grantor), with
// what was granted on from it (CASCADE). Chains are cut at the grant that touches role. The
// provider's own membership in role is kept: it is how a provider that is not a superuser
// acts as the owner of the consumer's database. revokesAny is whether the server lets the
// provider revoke any membership (powers).
func (b *Backend) revokeMemberships(ctx context.Context, tx pgx.Tx, role string, revokesAny bool, told *facts) error {
	rows, err := tx.Query(ctx, `SELECT g.rolname::text, m.rolname::text, gr.rolname::text
FROM pg_catalog.pg_auth_members a
JOIN pg_catalog.pg_roles g ON g.oid = a.roleid
JOIN pg_catalog.pg_roles m ON m.oid = a.member
JOIN pg_catalog.pg_roles gr ON gr.oid = a.grantor
WHERE (g.rolname = $1 OR m.rolname = $1) AND NOT (g.rolname = $1 AND m.rolname = current_user)
ORDER BY 1, 2, 3`, role)
	if err != nil {
		return err
	}
	var grants [][3]string
	var grant [3]string
	if _, err := pgx.ForEachRow(rows, []any{&grant[0], &grant[1], &grant[2]}, func() error {
		grants = append(grants, grant)
		return nil
	}); err != nil {
		return err
	}
	for _, g := range grants {
		revoke := "REVOKE " + ident(g[0]) + " FROM " + ident(g[1]) + " GRANTED BY " + ident(g[2]) + " CASCADE"
		if revokesAny {
			if _, err := tx.Exec(ctx, revoke); err != nil {
				return fmt.Errorf("revoke %s from %s: %w", g[0], g[1], err)
			}
			continue
		}
		// From PostgreSQL 16 a role that is not a superuser may not revoke what a role whose
		// privileges it lacks granted: said once, and the grant stays drift for an operator.
		err := pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error { _, err := sp.Exec(ctx, revoke); return err })
		switch {
		case pgCode(err) == insufficientPrivilege:
			grant := sayKey{role, membershipKept, g[0] + ">" + g[1] + "/" + g[2]}
			told.holds(grant, "denied", "%s: the membership of %s in %s, granted by %s, cannot be "+
				"revoked by the provider's role %s (%s); revoke it as a superuser: REVOKE %s FROM %s GRANTED BY %s",
				role, g[1], g[0], g[2], b.self, pgMessage(err), ident(g[0]), ident(g[1]), ident(g[2]))
		case err != nil:
			return fmt.Errorf("revoke %s from %s: %w", g[0], g[1], err)
		}
	}
	return nil
}

// ownMembership makes the provider a member of role where its powers p say it acts as the
// owner through one (a provider that is not a superuser): the server
// lets only a member (before PostgreSQL 16) or one that may SET the role (from 16) name it
// the owner of a database, and act as that owner. From 16 the membership is SET only, never
// INHERIT, so that the provider never holds the consumer's privileges by default.
func ownMembership(ctx context.Context, tx pgx.Tx, role string, p powers) error {
	if !p.asMember {
		return nil
	}
	grant := "GRANT " + ident(role) + " TO CURRENT_USER"
	if p.setOnly {
		grant += " WITH INHERIT FALSE, SET TRUE"
	}
	if _, err := tx.Exec(ctx, grant); err != nil {
		return fmt.Errorf("make the provider a member of %s: %w", role, err)
	}
	return nil
}

// setRecord writes r on role, in the transaction tx.
func setRecord(ctx context.Context, tx pgx.Tx, role string, r record) error {
	_, err := tx.Exec(ctx, "COMMENT ON ROLE "+ident(role)+" IS "+literal(r.text()))
	return err
}

// closeAndOpen, as the database's owner, takes from everyone but its owner the right to
// connect to db (PUBLIC's default rights include CONNECT and TEMPORARY; others are revoked as
// found), then lets connections in and makes sure it is no template. A provider that is not a
// superuser (self, its role) keeps CREATE on it, to make its extensions schema there.
func closeAndOpen(ctx context.Context, tx pgx.Tx, db, self string, open []string, cs []change) error {
	if hasKind(cs, openToOthers) {
		if _, err := tx.Exec(ctx, "REVOKE CONNECT, TEMPORARY ON DATABASE "+ident(db)+" FROM PUBLIC"); err != nil {
			return err
		}
		for _, grantee := range open {
			if grantee == "PUBLIC" || grantee == self {
				continue
			}
			if _, err := tx.Exec(ctx, "REVOKE CONNECT ON DATABASE "+ident(db)+" FROM "+ident(grantee)); err != nil {
				return err
			}
		}
	}
	if hasKind(cs, closedToProvider) {
		if _, err := tx.Exec(ctx, "GRANT CONNECT, CREATE ON DATABASE "+ident(db)+" TO "+ident(self)); err != nil {
			return err
		}
	}
	if hasKind(cs, connectionsOff, isTemplate) {
		if _, err := tx.Exec(ctx, "ALTER DATABASE "+ident(db)+" WITH ALLOW_CONNECTIONS true IS_TEMPLATE false"); err != nil {
			return err
		}
	}
	return nil
}

// asOwner runs fn in a transaction of conn acting as role, the owner of a consumer's database,
// where the provider acts through a membership (asMember, a provider that is not a superuser):
// only the owner may revoke PUBLIC's rights on it, open it, or drop what the role owns. A
// superuser runs fn as itself.
func asOwner(ctx context.Context, conn interface {
	Begin(context.Context) (pgx.Tx, error)
}, role string, asMember bool, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if asMember {
			if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+ident(role)); err != nil {
				return fmt.Errorf("act as the owner %s: %w", role, err)
			}
		}
		return fn(tx)
	})
}
