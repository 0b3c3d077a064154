package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/novox/postgres-provider/ports"
)

// The record of what the provider manages is a comment on each role it manages, written in the
// transaction that creates or alters the role. A role's comment lives in the cluster-wide
// catalog (pg_shdescription), as roles do, whatever database the provider connects to; it goes
// with DROP ROLE, so a dropped role leaves no record behind; and only a superuser or a role
// with CREATEROLE may write it, which a consumer never is.

// recordPrefix starts every comment the provider writes on a role it manages, before the JSON.
const recordPrefix = "novox-provisioner "

// States of a record.
const (
	active    = "active"
	withdrawn = "withdrawn"
)

// record is what the provider keeps on a role it manages. It holds no password, nor anything
// derived from one.
type record struct {
	// Resource is the requirement of the provider that manages the role.
	Resource string `json:"resource"`
	// Database is the database Create made for the consumer.
	Database string `json:"database"`
	// Derived is what the mesh derived for the consumer when it was last created.
	Derived map[string]any `json:"derived,omitempty"`
	// State is active or withdrawn; Since is when it was withdrawn.
	State string     `json:"state"`
	Since *time.Time `json:"since,omitempty"`
}

// parseRecord reads a role's comment; ok is false where the comment is not a record.
func parseRecord(comment *string) (record, bool) {
	if comment == nil || !strings.HasPrefix(*comment, recordPrefix) {
		return record{}, false
	}
	var r record
	if err := json.Unmarshal([]byte(strings.TrimPrefix(*comment, recordPrefix)), &r); err != nil || r.Resource == "" {
		return record{}, false
	}
	return r, true
}

// text is the comment that holds r.
func (r record) text() string {
	raw, _ := json.Marshal(r)
	return recordPrefix + string(raw)
}

// managed is r as the domain sees it.
func (r record) managed(as string) ports.Managed {
	m := ports.Managed{As: as, Derived: r.Derived, Withdrawn: r.State == withdrawn}
	if m.Withdrawn && r.Since != nil {
		m.Since = *r.Since
	}
	return m
}

// Managed lists the consumers this provider's record names, active or withdrawn, in one round
// trip that also checks the server as a whole: reachable, the provider let in, and a superuser.
// Its error says what is wrong with the server, and what to do.
func (b *Backend) Managed(ctx context.Context) ([]ports.Managed, error) {
	rows, err := b.pool.Query(ctx, `
SELECT s.super, r.rolname::text, d.description
FROM (SELECT rolsuper AS super FROM pg_roles WHERE rolname = current_user) s
LEFT JOIN (pg_roles r JOIN pg_shdescription d
           ON d.objoid = r.oid AND d.classoid = 'pg_authid'::regclass AND starts_with(d.description, $1))
       ON true`, recordPrefix)
	if err != nil {
		return nil, b.serverError(err)
	}
	var (
		super   bool
		out     []ports.Managed
		as      *string
		comment *string
	)
	_, err = pgx.ForEachRow(rows, []any{&super, &as, &comment}, func() error {
		if as == nil {
			return nil
		}
		if r, ok := parseRecord(comment); ok && r.Resource == b.resource {
			out = append(out, r.managed(*as))
		}
		return nil
	})
	if err != nil {
		return nil, b.serverError(err)
	}
	if !super {
		return nil, b.notSuperuser()
	}
	return out, nil
}

// roleFacts is what Create, Remove and Drop need to know of a role before they touch it.
type roleFacts struct {
	exists bool
	// powers are what make the role more than a plain login role, in words: "a superuser",
	// "a member of admins", "granted to alice", "the owner of sales", ...
	powers  []string
	comment *string
	// asMade is whether the role already is what Create makes of it, but its password and
	// connection limit: LOGIN, no powers, valid for ever.
	asMade bool
	limit  int
	// stored is the role's password verifier.
	stored *string
}

// factsOf reads what roleFacts holds for role, whose database is database.
func factsOf(ctx context.Context, q pgx.Tx, role, database string) (roleFacts, error) {
	var f roleFacts
	err := q.QueryRow(ctx, `
SELECT r.oid IS NOT NULL,
       array_remove(ARRAY[
           CASE WHEN r.rolsuper THEN 'a superuser' END,
           CASE WHEN r.rolcreaterole THEN 'allowed to create roles' END,
           CASE WHEN r.rolreplication THEN 'allowed to replicate' END,
           CASE WHEN r.rolbypassrls THEN 'allowed to bypass row security' END,
           (WITH RECURSIVE up (oid) AS ( -- every role it is a member of, directly or not
                SELECT m.roleid FROM pg_catalog.pg_auth_members m WHERE m.member = r.oid
                UNION SELECT m.roleid FROM pg_catalog.pg_auth_members m JOIN up ON m.member = up.oid)
            SELECT 'a member of ' || string_agg(g.rolname, ', ' ORDER BY g.rolname)
            FROM up JOIN pg_catalog.pg_roles g ON g.oid = up.oid
            WHERE g.rolsuper OR g.rolcreaterole OR g.rolreplication OR g.rolbypassrls OR starts_with(g.rolname, 'pg_')),
           -- roles that are members of it share what it owns, its database included
           (SELECT 'granted to ' || string_agg(g.rolname, ', ' ORDER BY g.rolname)
            FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles g ON g.oid = m.member WHERE m.roleid = r.oid),
           -- a database of somebody's the provider would drop with the role
           (SELECT 'the owner of ' || string_agg(d.datname, ', ' ORDER BY d.datname)
            FROM pg_catalog.pg_database d WHERE d.datdba = r.oid AND d.datname <> $2)
       ], NULL),
       pg_catalog.shobj_description(r.oid, 'pg_authid'),
       coalesce(r.rolcanlogin AND NOT (r.rolsuper OR r.rolcreatedb OR r.rolcreaterole OR r.rolreplication OR r.rolbypassrls)
                AND r.rolvaliduntil = 'infinity', false),
       a.rolpassword, coalesce(r.rolconnlimit, -1)
FROM (VALUES (1)) AS one (x)
LEFT JOIN pg_catalog.pg_roles r ON r.rolname = $1
LEFT JOIN pg_catalog.pg_authid a ON a.oid = r.oid`, role, database).Scan(&f.exists, &f.powers, &f.comment, &f.asMade, &f.stored, &f.limit)
	return f, err
}

// ours answers the record on role where it is this provider's, and an error that says whose
// the role is otherwise.
func (b *Backend) ours(role string, f roleFacts) (record, error) {
	r, ok := parseRecord(f.comment)
	switch {
	case !ok:
		return record{}, errNotRecorded
	case r.Resource != b.resource:
		return record{}, fmt.Errorf("role %s is managed by the provider of %q, not %q; it is not taken over", role, r.Resource, b.resource)
	}
	return r, nil
}

// errNotRecorded is a role that exists and is in no provider's record.
var errNotRecorded = errors.New("not in the record")

// setRecord writes r on role, in the transaction tx.
func setRecord(ctx context.Context, tx pgx.Tx, role string, r record) error {
	_, err := tx.Exec(ctx, "COMMENT ON ROLE "+ident(role)+" IS "+literal(r.text()))
	return err
}
