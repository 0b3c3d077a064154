package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/novox/postgres-provider/ports"
)

// Holds reports whether the role exists with LOGIN and no powers, is not past its VALID UNTIL,
// has a stored password made from p's, owns the database, which PUBLIC cannot connect to, and
// whether every named extension the server has available is installed there. It changes
// nothing: one query for the role and database facts, and only where extensions are named, a
// read-only connection to the consumer's database.
func (b *Backend) Holds(ctx context.Context, p ports.Provision) (ports.Holding, error) {
	held, err := b.holds(ctx, p)
	if err != nil || held {
		return ports.Holding{Held: held}, err
	}
	return ports.Holding{Drift: []string{"not as Create makes it"}}, nil
}

// HoldsAll is Holds for each of ps, each bounded by each.
func (b *Backend) HoldsAll(ctx context.Context, ps []ports.Provision, each time.Duration) []ports.Checked {
	out := make([]ports.Checked, len(ps))
	for i, p := range ps {
		cctx, cancel := context.WithTimeout(ctx, each)
		out[i].Holding, out[i].Err = b.Holds(cctx, p)
		cancel()
	}
	return out
}

func (b *Backend) holds(ctx context.Context, p ports.Provision) (bool, error) {
	pl, err := b.planOf(p)
	if err != nil {
		return false, err
	}
	var (
		roleOK, dbOK bool
		stored       *string
		comment      *string
		available    []string // nil where none are named
	)
	err = b.pool.QueryRow(ctx, `
SELECT coalesce(r.rolcanlogin AND NOT (r.rolsuper OR r.rolcreatedb OR r.rolcreaterole OR r.rolreplication OR r.rolbypassrls)
                AND coalesce(r.rolvaliduntil > now(), true), false),
       r.rolpassword,
       coalesce(d.datdba = r.oid AND NOT has_database_privilege('public', d.oid, 'CONNECT'), false),
       CASE WHEN cardinality($3::text[]) > 0 -- listing what is available reads every control file
            THEN ARRAY(SELECT name::text FROM pg_available_extensions WHERE name = ANY($3::text[])) END,
       shobj_description(r.oid, 'pg_authid')
FROM (VALUES (1)) AS one (x)
LEFT JOIN pg_authid r ON r.rolname = $1
LEFT JOIN pg_database d ON d.datname = $2`,
		pl.role, pl.database, orNone(pl.extensions)).Scan(&roleOK, &stored, &dbOK, &available, &comment)
	if err != nil {
		return false, fmt.Errorf("check role %s: %w", pl.role, err)
	}
	if rec, ok := parseRecord(comment); !ok || rec.Resource != b.resource || rec.State != active {
		return false, nil
	}
	if !roleOK || !dbOK || stored == nil || !b.verified.verifies(*stored, p.Password, pl.role) {
		return false, nil
	}
	if len(available) == 0 {
		return true, nil
	}
	db, err := b.connectTo(ctx, pl.database, true)
	if err != nil {
		return false, fmt.Errorf("check extensions in %s: %w", pl.database, err)
	}
	defer db.Close(context.WithoutCancel(ctx))
	var installed int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM pg_extension WHERE extname = ANY($1)", available).Scan(&installed); err != nil {
		return false, fmt.Errorf("check extensions in %s: %w", pl.database, err)
	}
	return installed == len(available), nil
}
