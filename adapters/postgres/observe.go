// What the server holds of a consumer, read in one shape by one query for one consumer (Create,
// adoption, Remove, Drop) or for all of them (a check, a plan).

package postgres

import (
	"context"
	"strings"

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
	// What it holds across the cluster (sqlOwns, sqlOwnsIn, sqlGrantedIn), read only where one
	// consumer is observed with its holdings: the databases it owns, those it owns objects in
	// and those it holds privileges in ("" for shared objects).
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
// (only in a transaction that roleTxSQL keeps out of every log, or a check's catalog), the
// role's memberships either way (what a comparison weighs: sqlMemberships, the costliest part
// to plan and to run), what the role holds across the cluster (for one consumer only:
// sqlHeldCTE reads one role), and what the rule of what Create may take asks besides (claim: a
// renamed role, the ADMIN option; claimBy says how).
type reading struct {
	verifier, memberships, holdings bool
	claim                           claimBy
}

// claimBy is how a reading finds the roles whose record names a consumer's login, for the
// claim: not at all; by searching every record for the login (claimOne: a create reads one
// consumer, and a search is the cheapest way to one); or by reading each record's logins once
// and joining them to every consumer's (claimAll: a plan reads all, and a search for each role
// to be made scans every record again: Foresee of 5,000 roles held and 5,000 to be made, on a
// server holding nothing else, took 9.2-9.4 s so and 0.18-0.20 s this way, PostgreSQL 15,
// 2026-12-07). Both hand Go the same records of those parseRecord takes: a login holds no
// quote (checkIdentifier), and in a record that parses the last quote of each "login":" opens
// a string, so no two overlap and the login read after each is the one a search finds; which
// record names which login, and whether it is the provider's, renamedTo decides either way.
// Both look for "login":"<login>" as the provider writes it: a record rewritten by hand with
// spaces, another case or escapes in that pair is found by neither, as before claimBy.
type claimBy int

const (
	claimNone claimBy = iota
	claimOne
	claimAll
)

// Which readings each act takes: what Create reads before its verdict (and Foresee, of a
// role it may adopt, to reach the same one); what a plan reads of every consumer at once (all
// of that but what a role holds, which sqlHeldCTE reads of one role, and only a role the
// verdict may adopt is weighed by: definition.weighsHoldings); what a check compares; what is
// read of a role being withdrawn, or whose withdrawn record is rewritten in the current
// format: whether it exists and its record, nothing it is compared by (no verifier, no
// memberships: a drop's observation took half the server's time it did, 2026-12-07); and of
// one being dropped, what it holds besides.
var (
	forVerdict    = reading{verifier: true, memberships: true, holdings: true, claim: claimOne}
	forPlan       = reading{verifier: true, memberships: true, claim: claimAll}
	forCheck      = reading{verifier: true, memberships: true}
	forWithdrawal = reading{}
	forDrop       = reading{holdings: true}
)

// sqlOthers is an ACL item a of a database d that is not its owner's nor the provider's.
const sqlOthers = `a.grantee <> d.datdba AND a.grantee <> (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user)`

// sqlClaimOne is what the claim reads of a consumer w whose role r may not exist, searching
// (claimOne): the roles, not named as it, whose record names w's login, which Go reads as
// records (a login's letters never need escaping in JSON). The pattern is built with ||, not
// concat, which formats its arguments at every row. Each record is read at each create of a
// role: with 5,000 records the observation of a new consumer took 2.2-2.6 ms of the server's
// time with starts_with and concat, 1.9-2.1 ms with either replaced and 1.4-1.7 ms with both
// (that of a consumer whose role exists 0.9 ms; PostgreSQL 15, 2026-12-07).
var sqlClaimOne = `
LEFT JOIN LATERAL (SELECT array_agg(o.rolname::text ORDER BY o.rolname) AS names,
                          array_agg(sd.description ORDER BY o.rolname) AS comments
    FROM ` + sqlRecords + `
    WHERE r.oid IS NULL AND pg_catalog.strpos(sd.description, '"login":"' || w.role || '"') > 0
      AND o.rolname <> w.role) ren ON true`

// sqlClaimAllCTE and sqlClaimAll read the same of every consumer at once (claimAll): each
// record's logins, read once, grouped by login and joined to the consumers' whose roles do not
// exist.
var (
	sqlClaimAllCTE = `,
claims AS (SELECT DISTINCT m[1] AS login, o.rolname::text AS name, sd.description
    FROM ` + sqlRecords + `,
      LATERAL pg_catalog.regexp_matches(sd.description, '"login":"([^"]*)"', 'g') m
    WHERE o.rolname <> m[1]),
ren AS (SELECT login, array_agg(name ORDER BY name) AS names, array_agg(description ORDER BY name) AS comments
    FROM claims GROUP BY login)`
	sqlClaimAll = `
LEFT JOIN ren ON r.oid IS NULL AND ren.login = w.role`
)

// column is one column of observeSQL: the server's expression over a consumer's row (w, its
// role r, its database d), and the field of observed that takes its value. Where a reading
// does not ask for it (asked), none stands in its place. Each column is listed with its field,
// so that none is matched to another by its position.
type column struct {
	sql   string
	into  func(o *observed) any
	asked func(r reading) bool // nil: every reading asks for it
	none  string
}

// Which reading asks for a column (column.asked).
func asksVerifier(r reading) bool    { return r.verifier }
func asksMemberships(r reading) bool { return r.memberships }
func asksHoldings(r reading) bool    { return r.holdings }
func asksClaim(r reading) bool       { return r.claim != claimNone }

// observedColumns are observeSQL's columns, in its order.
var observedColumns = []column{
	{sql: `r.oid IS NOT NULL`, into: func(o *observed) any { return &o.role }},
	{sql: `coalesce(r.rolcanlogin, false)`, into: func(o *observed) any { return &o.login }},
	{sql: sqlAttributes, into: func(o *observed) any { return &o.attributes }},
	{sql: sqlForever, into: func(o *observed) any { return &o.forever }},
	{sql: sqlExpired, into: func(o *observed) any { return &o.expired }},
	{sql: sqlMemberOf, into: func(o *observed) any { return &o.memberOf }, asked: asksMemberships, none: `'{}'::text[]`},
	{sql: sqlGrantedTo, into: func(o *observed) any { return &o.grantedTo }, asked: asksMemberships, none: `'{}'::text[]`},
	{sql: sqlOwns, into: func(o *observed) any { return &o.owns }, asked: asksHoldings, none: `'{}'::text[]`},
	{sql: sqlOwnsIn, into: func(o *observed) any { return &o.ownsIn }, asked: asksHoldings, none: `'{}'::text[]`},
	{sql: sqlGrantedIn, into: func(o *observed) any { return &o.grantedIn }, asked: asksHoldings, none: `'{}'::text[]`},
	{sql: `pg_catalog.shobj_description(r.oid, 'pg_authid')`, into: func(o *observed) any { return &o.comment }},
	{sql: `au.rolpassword`, into: func(o *observed) any { return &o.stored }, asked: asksVerifier, none: `NULL::text`},
	{sql: `coalesce(r.rolconnlimit, -1)`, into: func(o *observed) any { return &o.limit }},
	// The roles whose comment could be this provider's record of w's login (claimBy), and
	// whether the provider's role has the ADMIN option on r.
	{sql: `coalesce(ren.names, '{}')`, into: func(o *observed) any { return &o.others }, asked: asksClaim, none: `'{}'::text[]`},
	{sql: `coalesce(ren.comments, '{}')`, into: func(o *observed) any { return &o.otherComments }, asked: asksClaim, none: `'{}'::text[]`},
	{sql: `coalesce(pg_catalog.pg_has_role(r.oid, 'MEMBER WITH ADMIN OPTION'), false)`,
		into: func(o *observed) any { return &o.admin }, asked: asksClaim, none: `false`},
	{sql: `d.oid IS NOT NULL`, into: func(o *observed) any { return &o.database }},
	{sql: `coalesce(pg_catalog.pg_get_userbyid(d.datdba)::text, '')`, into: func(o *observed) any { return &o.owner }},
	{sql: `pg_catalog.shobj_description(d.datdba, 'pg_authid')`, into: func(o *observed) any { return &o.ownerComment }},
	{sql: `coalesce(d.datallowconn, false)`, into: func(o *observed) any { return &o.allowed }},
	{sql: `coalesce(d.datistemplate, false)`, into: func(o *observed) any { return &o.template }},
	{sql: `ARRAY(SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee)::text END
             FROM pg_catalog.aclexplode(coalesce(d.datacl, pg_catalog.acldefault('d', d.datdba))) a
             WHERE a.privilege_type = 'CONNECT' AND ` + sqlOthers + ` ORDER BY 1)`, into: func(o *observed) any { return &o.open }},
	{sql: `coalesce(pg_catalog.has_database_privilege(d.oid, 'CONNECT') AND pg_catalog.has_database_privilege(d.oid, 'CREATE'), false)`,
		into: func(o *observed) any { return &o.provides }},
	{sql: `coalesce((SELECT 'search_path=' || $3 = ANY(s.setconfig) FROM pg_catalog.pg_db_role_setting s
                 WHERE s.setrole = r.oid AND s.setdatabase = d.oid), false)`, into: func(o *observed) any { return &o.searchPath }},
	{sql: `coalesce((SELECT s.setconfig FROM pg_catalog.pg_db_role_setting s WHERE s.setrole = r.oid AND s.setdatabase = d.oid), '{}')`,
		into: func(o *observed) any { return &o.setconfig }},
}

// observeSQL is the one query that observes consumers: $1 their roles, $2 their databases,
// $3 the provider's search_path; one row each, in their order, of observedColumns. A provider
// that is not a superuser reads no verifier (they are a superuser's to read). The roles are
// those of the consumers' list (w), not rolname = ANY($1): planned generically, as a check
// plans it (catalog), that took 4.5 s at 10,000 consumers on PostgreSQL 17, the databases
// joined by a nested loop as if the list were short, where this takes 0.3 s.
func observeSQL(r reading, readsVerifiers bool) string {
	r.verifier = r.verifier && readsVerifiers
	columns := make([]string, len(observedColumns))
	for i, c := range observedColumns {
		if columns[i] = c.sql; c.asked != nil && !c.asked(r) {
			columns[i] = c.none
		}
	}
	var memberships, membershipJoins, heldCTE, authid, claimCTE, claimJoin string
	if r.memberships {
		memberships, membershipJoins = ",\nroots AS (SELECT oid FROM r), "+sqlMemberships, sqlMembershipJoins
	}
	if r.holdings {
		heldCTE = ", " + sqlHeldCTE
	}
	if r.verifier {
		authid = "\nLEFT JOIN pg_catalog.pg_authid au ON au.oid = r.oid"
	}
	switch r.claim {
	case claimOne:
		claimJoin = sqlClaimOne
	case claimAll:
		claimCTE, claimJoin = sqlClaimAllCTE, sqlClaimAll
	}
	return `WITH RECURSIVE w AS (SELECT * FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS w (role, db, i)),
r AS (SELECT * FROM pg_catalog.pg_roles WHERE rolname IN (SELECT w.role FROM w))` + memberships + heldCTE + claimCTE + `
SELECT ` + strings.Join(columns, ",\n       ") + `
FROM w
LEFT JOIN r ON r.rolname = w.role
LEFT JOIN pg_catalog.pg_database d ON d.datname = w.db
` + membershipJoins + authid + claimJoin + `
ORDER BY w.i`
}

// scanObserved reads the rows of observeSQL, each column into its field.
func scanObserved(rows pgx.Rows) ([]observed, error) {
	var out []observed
	var o observed
	into := make([]any, len(observedColumns))
	for i, c := range observedColumns {
		into[i] = c.into(&o)
	}
	_, err := pgx.ForEachRow(rows, into, func() error {
		out = append(out, o)
		return nil
	})
	return out, err
}

// sqlPlanOnce has the statements of the transaction it opens planned once a session (a generic
// plan; plan_cache_mode, local to the transaction): the verdict's observation (forVerdict), a
// statement the session keeps prepared, is otherwise planned anew for every consumer by the
// server's custom plans, which it never gives up for this query (1.3-2.3 ms of the server's
// CPU each on PostgreSQL 15, more than running it takes; the generic plan takes 0.05 ms and
// runs as fast). Create's role transaction opens with it, and a check's catalog round trip
// (catalog) starts with it, local to the round trip's implicit transaction. Foresee's reading
// does not: a plan sends nothing that sets anything but its sessions' read-only mode
// (TestPlanNamesEveryActionAndChangesNothing), and a plan is run by hand, not at every pass.
const sqlPlanOnce = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true)`

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
	o, read := observe(ctx, tx, s.powers, d.role, d.database, forVerdict)
	if read != nil {
		return j, read, nil
	}
	j, tried = judgeSeen(ctx, tx, d, s, o, verified, password)
	return j, nil, tried
}

// judgeSeen is judge on the consumer d observed as o (read as a verdict reads it, or, by a plan,
// with the rest of the consumers: forPlan).
func judgeSeen(ctx context.Context, tx pgx.Tx, d definition, s stance, o observed, verified *verifiedCache, password string) (j judged, tried error) {
	j.observed = o
	if j.vet, tried = vetWithin(ctx, tx, d.settings); tried != nil {
		return j, tried
	}
	j.verifies = password != "" && j.stored != nil && verified.verifies(*j.stored, password, d.role)
	j.verdict = d.decide(j.observed, s, j.vet)
	return j, nil
}
