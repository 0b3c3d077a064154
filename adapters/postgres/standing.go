// The definition of a consumer's role, and the SQL fragments that read a role against it.

package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// A consumer's role as the provider makes it, in one place: LOGIN, no attributes, valid for
// ever, a member of no role and no role a member of it, owning its databases and what is in
// them and nothing in any other database. Create makes it so (roleDDL, revokeMemberships),
// a check compares a role with it (standing.drift), and adoption takes only a role that
// already is it (standing.unadoptable). The SQL below is the catalog's side of the same
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

// sqlMembershipColumns are the role r's member_of and granted_to, joined by sqlMembershipJoins.
const (
	sqlMembershipColumns = `coalesce(mo.names, '{}'), coalesce(gt.names, '{}')`
	sqlMembershipJoins   = `LEFT JOIN member_of mo ON mo.root = r.oid LEFT JOIN granted_to gt ON gt.root = r.oid`
)

// sqlHeld is what r holds in each database, from the cluster-wide pg_shdepend: the databases
// it owns; those in which it owns objects or is named by a policy ("" for shared objects other
// than databases); and those in which it was only granted privileges (on the database itself
// included).
const sqlHeld = `ARRAY(SELECT d.datname::text FROM pg_catalog.pg_database d WHERE d.datdba = r.oid ORDER BY 1),
       ARRAY(SELECT DISTINCT coalesce(d.datname::text, '') FROM held h LEFT JOIN pg_catalog.pg_database d ON d.oid = h.db
             WHERE h.deptype NOT IN ('a', 'i') ORDER BY 1),
       ARRAY(SELECT DISTINCT coalesce(d.datname::text, '') FROM held h LEFT JOIN pg_catalog.pg_database d ON d.oid = h.db
             WHERE h.deptype IN ('a', 'i') ORDER BY 1)`

// sqlHeldCTE is the held relation sqlHeld reads, for the role r (a relation of one row).
const sqlHeldCTE = `held AS (
    SELECT s.deptype, CASE WHEN s.dbid <> 0 THEN s.dbid
                           WHEN s.classid = 'pg_catalog.pg_database'::pg_catalog.regclass THEN s.objid END AS db
    FROM pg_catalog.pg_shdepend s, r
    WHERE s.refclassid = 'pg_catalog.pg_authid'::pg_catalog.regclass AND s.refobjid = r.oid
      AND NOT (s.dbid = 0 AND s.classid = 'pg_catalog.pg_database'::pg_catalog.regclass AND s.deptype = 'o'))`

// standing is how a role stands against the definition.
type standing struct {
	login      bool
	attributes []string // "a superuser", "allowed to create databases", ...
	forever    bool     // valid for ever
	expired    bool
	memberOf   []string // "finance", "postgres through finance"
	grantedTo  []string // "intruder", "intruder through helper"
}

// drift is how the role differs from the definition, in the words a check says.
func (s standing) drift() []string {
	var d []string
	if !s.login {
		d = append(d, "login")
	}
	if len(s.attributes) > 0 {
		d = append(d, "powers")
	}
	switch {
	case s.expired:
		d = append(d, "expired")
	case !s.forever:
		d = append(d, "valid until")
	}
	for _, g := range s.memberOf {
		d = append(d, "member of "+g)
	}
	for _, g := range s.grantedTo {
		d = append(d, "granted to "+g)
	}
	return d
}

// asMade is whether the role's own attributes are the definition's: LOGIN, none other, valid
// for ever.
func (s standing) asMade() bool {
	return s.login && len(s.attributes) == 0 && s.forever && !s.expired
}

// memberships is whether the role is a member of a role, or a role a member of it.
func (s standing) memberships() bool { return len(s.memberOf)+len(s.grantedTo) > 0 }

// holdings is what a role holds across the cluster.
type holdings struct {
	databases []string // it owns
	ownsIn    []string // databases it owns objects in ("" for shared objects)
	grantedIn []string // databases it holds privileges in ("" for shared objects)
}

// unadoptable is the first reason why a role the provider did not make is not what it would
// have made for a consumer whose database is database, in words that follow "it is"; "" where
// it is exactly that and may be adopted.
func unadoptable(s standing, h holdings, database string) string {
	mine := func(db string) bool { return db == database }
	switch {
	case len(s.attributes) > 0:
		return s.attributes[0]
	case !s.login:
		return "not a login role"
	case s.expired:
		return "expired"
	case !s.forever:
		return "valid only until a date"
	case len(s.memberOf) > 0:
		return "a member of " + s.memberOf[0]
	case len(s.grantedTo) > 0:
		return "granted to " + s.grantedTo[0]
	}
	if i := slices.IndexFunc(h.databases, func(db string) bool { return !mine(db) }); i >= 0 {
		return "the owner of " + h.databases[i]
	}
	if i := slices.IndexFunc(h.ownsIn, func(db string) bool { return !mine(db) }); i >= 0 {
		return "the owner of objects in " + where(h.ownsIn[i])
	}
	if i := slices.IndexFunc(h.grantedIn, func(db string) bool { return !mine(db) }); i >= 0 {
		return "granted privileges in " + where(h.grantedIn[i])
	}
	return ""
}

// where names a database as sqlHeld answers it: "" is the cluster's shared objects.
func where(db string) string {
	if db == "" {
		return "shared objects (a tablespace, a parameter)"
	}
	return db
}

// roleDDL is the statement that makes role, or makes it again, as the definition says, with
// its connection limit and, where secret is not empty, its password (" PASSWORD '<verifier>'").
// A provider that is not a superuser names none of the attributes only a superuser may change
// (it cannot give them, and the server refuses even their absence).
func roleDDL(exists, delegated bool, role string, limit int, secret string) string {
	verb := "CREATE"
	if exists {
		verb = "ALTER"
	}
	super := " NOSUPERUSER NOREPLICATION NOBYPASSRLS"
	if delegated {
		super = ""
	}
	return verb + " ROLE " + ident(role) + " WITH LOGIN NOCREATEDB NOCREATEROLE" + super +
		" VALID UNTIL 'infinity' CONNECTION LIMIT " + strconv.Itoa(limit) + secret
}

// revokeMemberships revokes, in tx, every grant that makes role a member of another role or
// another role a member of it: each grantor's (PostgreSQL 16 keeps one per grantor), with
// what was granted on from it (CASCADE). Chains are cut at the grant that touches role. The
// provider's own membership in role is kept: it is how a provider that is not a superuser
// acts as the owner of the consumer's database.
func (b *Backend) revokeMemberships(ctx context.Context, tx pgx.Tx, role string) error {
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
		if !b.delegated() {
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
			if b.said.first("revoke/"+role+"/"+g[0]+">"+g[1]+"/"+g[2], "denied") {
				b.say(slog.LevelWarn, role, "%s: the membership of %s in %s, granted by %s, cannot be revoked by the provider's "+
					"role %s (%s); revoke it as a superuser: REVOKE %s FROM %s GRANTED BY %s", role, g[1], g[0], g[2], b.self,
					pgMessage(err), ident(g[0]), ident(g[1]), ident(g[2]))
			}
		case err != nil:
			return fmt.Errorf("revoke %s from %s: %w", g[0], g[1], err)
		}
	}
	return nil
}

// ownMembership makes the provider a member of role where it is not a superuser: the server
// lets only a member (before PostgreSQL 16) or one that may SET the role (from 16) name it
// the owner of a database, and act as that owner. From 16 the membership is SET only, never
// INHERIT, so that the provider never holds the consumer's privileges by default.
func (b *Backend) ownMembership(ctx context.Context, tx pgx.Tx, role string) error {
	if !b.delegated() {
		return nil
	}
	grant := "GRANT " + ident(role) + " TO CURRENT_USER"
	if b.from16() {
		grant += " WITH INHERIT FALSE, SET TRUE"
	}
	if _, err := tx.Exec(ctx, grant); err != nil {
		return fmt.Errorf("make the provider a member of %s: %w", role, err)
	}
	return nil
}

// joined is names joined for a line.
func joined(names []string) string { return strings.Join(names, ", ") }
