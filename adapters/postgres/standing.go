// The definition of a consumer's role, and the SQL fragments that read a role against it.

package postgres

import (
	"slices"
	"strings"
)

// A consumer's role as the provider makes it, in one place: LOGIN, no attributes, valid for
// ever, a member of no role and no role a member of it, owning its databases and what is in
// them and nothing in any other database. Create makes it so (roleDDL, revokeMemberships),
// a check compares a role with it (definition.changes), and adoption takes only a role that
// already is it (unadoptable). The SQL below is the catalog's side of the same
// definition; each fragment is an expression over a pg_roles row named r.

// sqlAttributes is what the role is allowed beyond logging in, in words.
const sqlAttributes = `array_remove(ARRAY[
           CASE WHEN r.rolsuper THEN 'a superuser' END,
           CASE WHEN r.rolcreaterole THEN 'allowed to create roles' END,
           CASE WHEN r.rolcreatedb THEN 'allowed to create databases' END,
           CASE WHEN r.rolreplication THEN 'allowed to replicate' END,
           CASE WHEN r.rolbypassrls THEN 'allowed to bypass row security' END], NULL)`

// sqlForever is whether the role is valid for ever (no VALID UNTIL, or infinity).
const sqlForever = `coalesce(r.rolvaliduntil IS NULL OR r.rolvaliduntil = 'infinity', false)`

// sqlExpired is whether the role's VALID UNTIL has passed.
const sqlExpired = `coalesce(r.rolvaliduntil <= pg_catalog.now(), false)`

// sqlMemberships are the CTEs (of a WITH RECURSIVE) that name, for each role in a relation
// roots (oid), every role it is a member of (member_of) and every role that is a member of it
// (granted_to), with any options (INHERIT, SET, ADMIN) and through any chain, asked once for
// all the roots: "finance", or "postgres through finance" where the role reaches postgres by
// way of its membership in finance, the grant to revoke. The provider's own membership in a
// consumer's role (its way to act as the owner where it is not a superuser) is not counted.
const sqlMemberships = `up (root, oid, via) AS (
    SELECT t.oid, m.roleid, 0::oid FROM roots t JOIN pg_catalog.pg_auth_members m ON m.member = t.oid
    UNION SELECT up.root, m.roleid, CASE WHEN up.via = 0 THEN up.oid ELSE up.via END
    FROM up JOIN pg_catalog.pg_auth_members m ON m.member = up.oid),
down (root, oid, via) AS (
    SELECT t.oid, m.member, 0::oid FROM roots t JOIN pg_catalog.pg_auth_members m ON m.roleid = t.oid
    WHERE m.member <> (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user)
    UNION SELECT down.root, m.member, CASE WHEN down.via = 0 THEN down.oid ELSE down.via END
    FROM down JOIN pg_catalog.pg_auth_members m ON m.roleid = down.oid),
member_of (root, names) AS MATERIALIZED (
    SELECT root, array_agg(w ORDER BY w) FROM (
        SELECT DISTINCT ON (root, oid) root, pg_catalog.pg_get_userbyid(oid)::text
               || CASE WHEN via = 0 THEN '' ELSE ' through ' || pg_catalog.pg_get_userbyid(via)::text END AS w
        FROM up ORDER BY root, oid, via) x GROUP BY root),
granted_to (root, names) AS MATERIALIZED (
    SELECT root, array_agg(w ORDER BY w) FROM (
        SELECT DISTINCT ON (root, oid) root, pg_catalog.pg_get_userbyid(oid)::text
               || CASE WHEN via = 0 THEN '' ELSE ' through ' || pg_catalog.pg_get_userbyid(via)::text END AS w
        FROM down ORDER BY root, oid, via) x GROUP BY root)`

// sqlMemberOf and sqlGrantedTo are the role r's member_of and granted_to, joined by
// sqlMembershipJoins.
const (
	sqlMemberOf        = `coalesce(mo.names, '{}')`
	sqlGrantedTo       = `coalesce(gt.names, '{}')`
	sqlMembershipJoins = `LEFT JOIN member_of mo ON mo.root = r.oid LEFT JOIN granted_to gt ON gt.root = r.oid`
)

// What r holds in each database, from the cluster-wide pg_shdepend: the databases it owns
// (sqlOwns); those in which it owns objects or is named by a policy ("" for shared objects
// other than databases: sqlOwnsIn); and those in which it was only granted privileges, on the
// database itself included (sqlGrantedIn).
const (
	sqlOwns   = `ARRAY(SELECT d.datname::text FROM pg_catalog.pg_database d WHERE d.datdba = r.oid ORDER BY 1)`
	sqlOwnsIn = `ARRAY(SELECT DISTINCT coalesce(d.datname::text, '') FROM held h LEFT JOIN pg_catalog.pg_database d ON d.oid = h.db
             WHERE h.deptype NOT IN ('a', 'i') ORDER BY 1)`
	sqlGrantedIn = `ARRAY(SELECT DISTINCT coalesce(d.datname::text, '') FROM held h LEFT JOIN pg_catalog.pg_database d ON d.oid = h.db
             WHERE h.deptype IN ('a', 'i') ORDER BY 1)`
)

// sqlHeldCTE is the held relation sqlOwnsIn and sqlGrantedIn read, for the role r (a relation
// of one row).
const sqlHeldCTE = `held AS (
    SELECT s.deptype, CASE WHEN s.dbid <> 0 THEN s.dbid
                           WHEN s.classid = 'pg_catalog.pg_database'::pg_catalog.regclass THEN s.objid END AS db
    FROM pg_catalog.pg_shdepend s, r
    WHERE s.refclassid = 'pg_catalog.pg_authid'::pg_catalog.regclass AND s.refobjid = r.oid
      AND NOT (s.dbid = 0 AND s.classid = 'pg_catalog.pg_database'::pg_catalog.regclass AND s.deptype = 'o'))`

// unadoptable is the first reason why a role the provider did not make is not what it would
// have made for a consumer whose database is database, in words that follow "it is"; "" where
// it is exactly that and may be adopted. Whatever of the role's own standing a check finds
// drifted (standingChanges) bars it, by the same rule: a kind of drift added there bars an
// adoption too.
func unadoptable(s observed, database string) string {
	mine := func(db string) bool { return db == database }
	if len(s.attributes) > 0 { // what it may do beyond a login is said first, by its name
		return s.attributes[0]
	}
	if cs := standingChanges(s); len(cs) > 0 {
		return cs[0].barring()
	}
	if i := slices.IndexFunc(s.owns, func(db string) bool { return !mine(db) }); i >= 0 {
		return "the owner of " + s.owns[i]
	}
	if i := slices.IndexFunc(s.ownsIn, func(db string) bool { return !mine(db) }); i >= 0 {
		return "the owner of objects in " + where(s.ownsIn[i])
	}
	if i := slices.IndexFunc(s.grantedIn, func(db string) bool { return !mine(db) }); i >= 0 {
		return "granted privileges in " + where(s.grantedIn[i])
	}
	return ""
}

// where names a database as sqlOwnsIn and sqlGrantedIn answer it: "" is the cluster's shared objects.
func where(db string) string {
	if db == "" {
		return "shared objects (a tablespace, a parameter)"
	}
	return db
}

// joined is names joined for a line.
func joined(names []string) string { return strings.Join(names, ", ") }
