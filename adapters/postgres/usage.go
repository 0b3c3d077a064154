// Usage: what each consumer takes of the server (its database's size, its sessions), read for
// all of them in one query.

package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/novox/postgres-provider/ports"
)

// Usage is what one consumer takes of the server: DatabaseBytes is the size on disk of the
// databases its role owns (its database), as pg_database_size counts it; Connections counts its
// role's sessions now.
type Usage = ports.Usage

// Usage answers, for each of the logins that has a role, what it takes of the server, in one
// query: the databases each owns, sized (pg_database_size, which asks the file system for every
// file of each database: the query's cost), and the server's sessions counted by role. A login
// without a role is left out; a database the provider may not connect to counts nothing. It
// changes nothing.
func (b *Backend) Usage(ctx context.Context, logins []string) (map[string]Usage, error) {
	out := make(map[string]Usage, len(logins))
	if len(logins) == 0 {
		return out, nil
	}
	rows, err := b.pool.Query(ctx, usageQuery, logins)
	if err != nil {
		return nil, fmt.Errorf("read usage: %w", b.serverError(err))
	}
	var login string
	var u Usage
	if _, err := pgx.ForEachRow(rows, []any{&login, &u.DatabaseBytes, &u.Connections}, func() error { out[login] = u; return nil }); err != nil {
		return nil, fmt.Errorf("read usage: %w", b.serverError(err))
	}
	return out, nil
}

// usageQuery is Usage's one query, of the logins $1.
const usageQuery = `WITH w AS (SELECT DISTINCT unnest($1::text[]) AS role),
sessions AS (SELECT a.usesysid, count(*) AS n FROM pg_catalog.pg_stat_activity a WHERE a.usesysid IS NOT NULL GROUP BY a.usesysid)
SELECT w.role,
       coalesce((SELECT sum(CASE WHEN pg_catalog.has_database_privilege(d.oid, 'CONNECT') THEN pg_catalog.pg_database_size(d.oid) END)
                 FROM pg_catalog.pg_database d
                 WHERE d.datdba = r.oid AND d.datallowconn AND NOT d.datistemplate), 0)::bigint,
       coalesce(s.n, 0)::int
FROM w JOIN pg_catalog.pg_roles r ON r.rolname = w.role
LEFT JOIN sessions s ON s.usesysid = r.oid`
