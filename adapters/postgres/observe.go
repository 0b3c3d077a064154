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
	// What Create's rule of what it may take reads (reading.claim): the roles, not this one,
	// whose comment could be this provider's record of its login (named with their comments),
	// and whether the provider's role administers the role (pg_has_role's ADMIN option).
	others, otherComments []string
	admin                 bool

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
// (only in a transaction that quietSQL keeps out of every log, or a check's catalog), what
// the role holds across the cluster (for one consumer only: sqlHeldCTE reads one role), and
// what the rule of what Create may take asks besides (claim: a renamed role, the ADMIN option).
type reading struct{ verifier, holdings, claim bool }

// Which readings each act takes: what Create reads before its verdict (and Foresee, to reach
// the same one), and what is read of a role being withdrawn, or whose withdrawn record is
// rewritten in the current format.
var (
	forVerdict    = reading{verifier: true, holdings: true, claim: true}
	forWithdrawal = reading{verifier: true, holdings: true}
)

// sqlClaim is what reading.claim reads of a consumer w whose role r may not exist: the roles,
// not named as it, whose comment starts as this provider's record and names w's login, which
// the server finds and Go reads as records (a login's letters never need escaping in JSON);
// and whether the provider's role has the ADMIN option on r.
var sqlClaim = `coalesce(ren.names, '{}'), coalesce(ren.comments, '{}'),
       coalesce(pg_catalog.pg_has_role(r.oid, 'MEMBER WITH ADMIN OPTION'), false)`

var sqlClaimJoin = `
LEFT JOIN LATERAL (SELECT array_agg(o.rolname::text ORDER BY o.rolname) AS names,
                          array_agg(sd.description ORDER BY o.rolname) AS comments
    FROM pg_catalog.pg_shdescription sd JOIN pg_catalog.pg_roles o ON o.oid = sd.objoid
    WHERE r.oid IS NULL AND sd.classoid = 'pg_catalog.pg_authid'::pg_catalog.regclass
      AND pg_catalog.starts_with(sd.description, ` + literal(recordPrefix) + `)
      AND pg_catalog.strpos(sd.description, pg_catalog.concat('"login":"', w.role, '"')) > 0
      AND o.rolname <> w.role) ren ON true`

// observeSQL is the one query that observes consumers: $1 their roles, $2 their databases,
// $3 the provider's search_path; one row each, in their order. A provider that is not a
// superuser reads no verifier (they are a superuser's to read).
func observeSQL(r reading, readsVerifiers bool) string {
	stored, authid, held, heldCTE := "NULL::text", "", `'{}'::text[], '{}'::text[], '{}'::text[]`, ""
	if r.verifier && readsVerifiers {
		stored, authid = "au.rolpassword", "\nLEFT JOIN pg_catalog.pg_authid au ON au.oid = r.oid"
	}
	if r.holdings {
		held, heldCTE = sqlHeld, ", "+sqlHeldCTE
	}
	claim, claimJoin := `'{}'::text[], '{}'::text[], false`, ""
	if r.claim {
		claim, claimJoin = sqlClaim, sqlClaimJoin
	}
	return `WITH RECURSIVE w AS (SELECT * FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS w (role, db, i)),
r AS (SELECT * FROM pg_catalog.pg_roles WHERE rolname = ANY($1::text[])),
roots AS (SELECT oid FROM r), ` + sqlMemberships + heldCTE + `
SELECT r.oid IS NOT NULL, coalesce(r.rolcanlogin, false), ` + sqlAttributes + `, ` + sqlForever + `, ` + sqlExpired + `,
       ` + sqlMembershipColumns + `,
       ` + held + `,
       pg_catalog.shobj_description(r.oid, 'pg_authid'), ` + stored + `, coalesce(r.rolconnlimit, -1),
       ` + claim + `,
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
` + sqlMembershipJoins + authid + claimJoin + `
ORDER BY w.i`
}

// scanObserved reads the rows of observeSQL.
func scanObserved(rows pgx.Rows) ([]observed, error) {
	var out []observed
	var o observed
	_, err := pgx.ForEachRow(rows, []any{&o.role, &o.login, &o.attributes, &o.forever, &o.expired,
		&o.memberOf, &o.grantedTo, &o.owns, &o.ownsIn, &o.grantedIn,
		&o.comment, &o.stored, &o.limit, &o.others, &o.otherComments, &o.admin,
		&o.database, &o.owner, &o.ownerComment, &o.allowed, &o.template, &o.open, &o.provides,
		&o.searchPath, &o.setconfig}, func() error {
		out = append(out, o)
		return nil
	})
	return out, err
}

// observe reads one consumer, role and database ("" where only the role matters), in one
// round trip on q, as a provider with the powers p may.
func observe(ctx context.Context, q querier, p powers, role, database string, r reading) (observed, error) {
	rows, err := q.Query(ctx, observeSQL(r, p.readsVerifiers), []string{role}, []string{database}, consumerSearchPath)
	if err != nil {
		return observed{}, err
	}
	out, err := scanObserved(rows)
	if err != nil || len(out) != 1 {
		return observed{}, err
	}
	return out[0], nil
}

// judged is a consumer as Create and Foresee find it before anything is written: one
// observation of it, the server's answer to its settings, and the verdict on both.
type judged struct {
	observed
	verdict
	vet error // the server's refusal of its settings; nil where it took them
}

// judge observes the consumer d in tx (observe, as a verdict reads it), tries its settings in a
// savepoint rolled back (vetWithin), checks password against its stored verifier where one is
// given, through the Backend's cache of answers (Foresee gives none: its check logs in, or
// reads the verifier, as a pass does), and decides as a provider standing as s: the one way
// Create and Foresee reach a verdict, so that what one reads or weighs the other does too. read
// is the observation's error and tried the trial's, each said by Create and Foresee in their
// own way; with either, there is no verdict.
func judge(ctx context.Context, tx pgx.Tx, d definition, s stance, verified *verifiedCache, password string) (j judged, read, tried error) {
	if j.observed, read = observe(ctx, tx, s.powers, d.role, d.database, forVerdict); read != nil {
		return j, read, nil
	}
	if j.vet, tried = vetWithin(ctx, tx, d.settings); tried != nil {
		return j, nil, tried
	}
	j.verifies = password != "" && j.stored != nil && verified.verifies(*j.stored, password, d.role)
	j.verdict = d.decide(j.observed, s, j.vet)
	return j, nil, nil
}
