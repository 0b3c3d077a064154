// The catalog's side of a check: what the server holds of many consumers' roles and databases,
// in one round trip.

package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// facts are what the catalog says of one consumer's role and database.
type facts struct {
	role, database    bool // they exist
	standing               // the role against the definition
	stored, comment   *string
	limit, wantLimit  int
	owner, open       bool     // the role owns the database; others may connect to it
	provides          bool     // the provider may connect to it and create in it
	allowed, template bool     // datallowconn, datistemplate
	searchPath        bool     // the role's search_path in the database is the provider's
	verifies          bool     // the stored password was made from the minted one
	available         []string // the extensions it names that the server has
	setconfig         []string // the role's settings in the database ("name=value")
	wantSettings      []setting
}

// catalogWithin is catalog on a connection of the pool, within each from when it has one.
func (b *Backend) catalogWithin(ctx context.Context, each time.Duration, roles, databases, named []string) ([]facts, map[string]string, error) {
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Release()
	cctx, cancel := context.WithTimeout(ctx, each)
	defer cancel()
	return b.catalog(cctx, conn, roles, databases, named, consumerSearchPath)
}

// catalog asks, in one round trip, what the server holds of each role and database, and which
// of the named extensions it has available, at which default version (listing those reads every
// control file, so only where some are named).
func (b *Backend) catalog(ctx context.Context, conn *pgxpool.Conn, roles, databases, named []string, searchPath string) ([]facts, map[string]string, error) {
	batch := &pgx.Batch{}
	relation, stored := "pg_catalog.pg_authid", "r.rolpassword"
	if b.delegated() { // stored verifiers are a superuser's to read
		relation, stored = "pg_catalog.pg_roles", "NULL::text"
	}
	batch.Queue(`WITH RECURSIVE w AS (SELECT * FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS w (role, db, i)),
roots AS (SELECT r.oid FROM `+relation+` r JOIN w ON r.rolname = w.role), `+sqlMemberships+`
SELECT r.oid IS NOT NULL, d.oid IS NOT NULL,
       coalesce(r.rolcanlogin, false), `+sqlAttributes+`, `+sqlForever+`, `+sqlExpired+`,
       `+sqlMembershipColumns+`,
       `+stored+`, pg_catalog.shobj_description(r.oid, 'pg_authid'), coalesce(r.rolconnlimit, -1),
       coalesce(d.datdba = r.oid, false),
       coalesce(EXISTS (SELECT 1 FROM pg_catalog.aclexplode(coalesce(d.datacl, pg_catalog.acldefault('d', d.datdba))) a
                        WHERE a.privilege_type = 'CONNECT' AND `+sqlOthers+`), false),
       coalesce(pg_catalog.has_database_privilege(d.oid, 'CONNECT') AND pg_catalog.has_database_privilege(d.oid, 'CREATE'), false),
       coalesce(d.datallowconn, false), coalesce(d.datistemplate, false),
       coalesce((SELECT 'search_path=' || $3 = ANY(s.setconfig) FROM pg_catalog.pg_db_role_setting s
                 WHERE s.setrole = r.oid AND s.setdatabase = d.oid), false),
       coalesce((SELECT s.setconfig FROM pg_catalog.pg_db_role_setting s WHERE s.setrole = r.oid AND s.setdatabase = d.oid), '{}')
FROM w
LEFT JOIN `+relation+` r ON r.rolname = w.role
LEFT JOIN pg_catalog.pg_database d ON d.datname = w.db
`+sqlMembershipJoins+`
ORDER BY w.i`, roles, databases, searchPath)
	if len(named) > 0 {
		batch.Queue("SELECT name::text, coalesce(default_version::text, '') FROM pg_catalog.pg_available_extensions WHERE name = ANY($1)", named)
	}
	results := conn.SendBatch(ctx, batch)
	defer results.Close()
	rows, err := results.Query()
	if err != nil {
		return nil, nil, err
	}
	out := make([]facts, 0, len(roles))
	var f facts
	_, err = pgx.ForEachRow(rows, []any{&f.role, &f.database, &f.login, &f.attributes, &f.forever, &f.expired,
		&f.memberOf, &f.grantedTo, &f.stored, &f.comment,
		&f.limit, &f.owner, &f.open, &f.provides, &f.allowed, &f.template, &f.searchPath,
		&f.setconfig}, func() error {
		out = append(out, f)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	available := map[string]string{}
	if len(named) > 0 {
		rows, err := results.Query()
		if err != nil {
			return nil, nil, err
		}
		var name, version string
		if _, err := pgx.ForEachRow(rows, []any{&name, &version}, func() error { available[name] = version; return nil }); err != nil {
			return nil, nil, err
		}
	}
	return out, available, nil
}
