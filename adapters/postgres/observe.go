// What the server holds of a consumer, read in one shape by one query for one consumer (Create,
// adoption, Remove, Drop) or for all of them (a check, a plan).

package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// observed is what the server holds of one consumer: its role (how it stands against the
// definition, what it holds, its record, its stored verifier, its limit), and its database
// with the role's settings in it.
type observed struct {
	role       bool // it exists
	login      bool
	attributes []string // "a superuser", "allowed to create databases", ...
	forever    bool     // valid for ever
	expired    bool
	memberOf   []string // "finance", "postgres through finance"
	grantedTo  []string // "intruder", "intruder through helper"
	// What it holds across the cluster (sqlHeld), read only where one consumer is observed
	// with its holdings: the databases it owns, those it owns objects in and those it holds
	// privileges in ("" for shared objects).
	owns, ownsIn, grantedIn []string
	comment                 *string // the record, where it is one
	stored                  *string // the stored verifier; nil where not read (a provider that is not a superuser)
	limit                   int

	database     bool     // it exists
	owner        string   // its owner's name
	ownerComment *string  // its owner's comment: a record of the provider's names another consumer
	allowed      bool     // datallowconn
	template     bool     // datistemplate
	open         []string // who besides the owner and the provider may connect: PUBLIC or roles granted CONNECT
	provides     bool     // the provider may connect to it and create in it
	searchPath   bool     // the role's search_path in the database is the provider's
	setconfig    []string // the role's settings in the database ("name=value")

	// verifies is whether the stored password was made from the minted one: not read, but
	// worked out from stored (or by logging in) by the caller that knows the password.
	verifies bool
}

// reading says what an observation reads beyond what every one does: the stored verifier
// (only in a transaction that quietSQL keeps out of every log, or a check's catalog), and what
// the role holds across the cluster (for one consumer only: sqlHeldCTE reads one role).
type reading struct{ verifier, holdings bool }

// observeSQL is the one query that observes consumers: $1 their roles, $2 their databases,
// $3 the provider's search_path; one row each, in their order. A provider that is not a
// superuser reads no verifier (they are a superuser's to read).
func observeSQL(r reading, delegated bool) string {
	stored, authid, held, heldCTE := "NULL::text", "", `'{}'::text[], '{}'::text[], '{}'::text[]`, ""
	if r.verifier && !delegated {
		stored, authid = "au.rolpassword", "\nLEFT JOIN pg_catalog.pg_authid au ON au.oid = r.oid"
	}
	if r.holdings {
		held, heldCTE = sqlHeld, ", "+sqlHeldCTE
	}
	return `WITH RECURSIVE w AS (SELECT * FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS w (role, db, i)),
r AS (SELECT * FROM pg_catalog.pg_roles WHERE rolname = ANY($1::text[])),
roots AS (SELECT oid FROM r), ` + sqlMemberships + heldCTE + `
SELECT r.oid IS NOT NULL, coalesce(r.rolcanlogin, false), ` + sqlAttributes + `, ` + sqlForever + `, ` + sqlExpired + `,
       ` + sqlMembershipColumns + `,
       ` + held + `,
       pg_catalog.shobj_description(r.oid, 'pg_authid'), ` + stored + `, coalesce(r.rolconnlimit, -1),
       d.oid IS NOT NULL, coalesce(pg_catalog.pg_get_userbyid(d.datdba)::text, ''),
       pg_catalog.shobj_description(d.datdba, 'pg_authid'),
       coalesce(d.datallowconn, false), coalesce(d.datistemplate, false),
       ARRAY(SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee)::text END
             FROM pg_catalog.aclexplode(coalesce(d.datacl, pg_catalog.acldefault('d', d.datdba))) a
             WHERE a.privilege_type = 'CONNECT' AND ` + sqlOthers + ` ORDER BY 1),
       coalesce(pg_catalog.has_database_privilege(d.oid, 'CONNECT') AND pg_catalog.has_database_privilege(d.oid, 'CREATE'), false),
       coalesce((SELECT 'search_path=' || $3 = ANY(s.setconfig) FROM pg_catalog.pg_db_role_setting s
                 WHERE s.setrole = r.oid AND s.setdatabase = d.oid), false),
       coalesce((SELECT s.setconfig FROM pg_catalog.pg_db_role_setting s WHERE s.setrole = r.oid AND s.setdatabase = d.oid), '{}')
FROM w
LEFT JOIN r ON r.rolname = w.role
LEFT JOIN pg_catalog.pg_database d ON d.datname = w.db
` + sqlMembershipJoins + authid + `
ORDER BY w.i`
}

// scanObserved reads the rows of observeSQL.
func scanObserved(rows pgx.Rows) ([]observed, error) {
	var out []observed
	var o observed
	_, err := pgx.ForEachRow(rows, []any{&o.role, &o.login, &o.attributes, &o.forever, &o.expired,
		&o.memberOf, &o.grantedTo, &o.owns, &o.ownsIn, &o.grantedIn,
		&o.comment, &o.stored, &o.limit,
		&o.database, &o.owner, &o.ownerComment, &o.allowed, &o.template, &o.open, &o.provides,
		&o.searchPath, &o.setconfig}, func() error {
		out = append(out, o)
		return nil
	})
	return out, err
}

// observe reads one consumer, role and database ("" where only the role matters), in one
// round trip on q.
func (b *Backend) observe(ctx context.Context, q querier, role, database string, r reading) (observed, error) {
	rows, err := q.Query(ctx, observeSQL(r, b.delegated()), []string{role}, []string{database}, consumerSearchPath)
	if err != nil {
		return observed{}, err
	}
	out, err := scanObserved(rows)
	if err != nil || len(out) != 1 {
		return observed{}, err
	}
	return out[0], nil
}
