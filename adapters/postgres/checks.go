package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/novox/postgres-provider/ports"
)

// Holds reports whether the server still holds the consumer exactly as Create makes it, and
// what drifted where it does not. It is HoldsAll of one.
func (b *Backend) Holds(ctx context.Context, p ports.Provision) (ports.Holding, error) {
	answer := b.HoldsAll(ctx, []ports.Provision{p}, b.timeout)[0]
	return answer.Holding, answer.Err
}

// HoldsAll checks every consumer of ps and changes nothing: one round trip asks the catalog
// about all their roles and databases (and which of the extensions they name the server has),
// the stored passwords are verified here (answers remembered per role), and only consumers
// that name extensions cost more: one short-lived, read-only connection per database, several
// at once within the Backend's connection budget. each bounds the catalog's round trip and
// each database's check.
func (b *Backend) HoldsAll(ctx context.Context, ps []ports.Provision, each time.Duration) []ports.Checked {
	out := make([]ports.Checked, len(ps))
	if len(ps) == 0 {
		return out
	}
	plans := make([]plan, len(ps))
	var roles, databases, named []string
	index := make([]int, 0, len(ps)) // which of ps are asked about
	for i, p := range ps {
		pl, err := b.planOf(p)
		if err != nil {
			out[i].Err = err
			continue
		}
		plans[i] = pl
		index = append(index, i)
		roles = append(roles, pl.role)
		databases = append(databases, pl.database)
		for _, x := range pl.extensions {
			if !slices.Contains(named, x) {
				named = append(named, x)
			}
		}
	}
	if len(index) == 0 {
		return out
	}
	cctx, cancel := context.WithTimeout(ctx, each)
	facts, available, err := b.catalog(cctx, roles, databases, named)
	cancel()
	if err != nil {
		for _, i := range index {
			out[i].Err = fmt.Errorf("check %s: %w", plans[i].role, err)
		}
		return out
	}
	var deep []int // the consumers whose databases must be looked into
	for k, i := range index {
		f := facts[k]
		f.available = make([]string, 0, len(plans[i].extensions))
		for _, x := range plans[i].extensions {
			if available[x] {
				f.available = append(f.available, x)
			}
		}
		f.verifies = f.stored != nil && b.verified.verifies(*f.stored, ps[i].Password, plans[i].role)
		facts[k] = f
		if drift := b.drift(f); len(drift) > 0 || len(f.available) == 0 {
			out[i].Holding = ports.Holding{Held: len(drift) == 0, Drift: drift}
			continue
		}
		deep = append(deep, k)
	}
	var wg sync.WaitGroup
	for _, k := range deep {
		i := index[k]
		wg.Add(1)
		go func() {
			defer wg.Done()
			dctx, cancel := context.WithTimeout(ctx, each)
			defer cancel()
			missing, err := b.missingExtensions(dctx, plans[i].database, facts[k].available)
			if err != nil {
				out[i].Err = fmt.Errorf("check extensions in %s: %w", plans[i].database, err)
				return
			}
			drift := make([]string, 0, len(missing))
			for _, x := range missing {
				drift = append(drift, "extension "+x+" missing")
			}
			out[i].Holding = ports.Holding{Held: len(drift) == 0, Drift: drift}
		}()
	}
	wg.Wait()
	return out
}

// facts are what the catalog says of one consumer's role and database.
type facts struct {
	role, database         bool // they exist
	login, powers, expired bool
	stored, comment        *string
	owner, publicConnect   bool
	verifies               bool     // the stored password was made from the minted one
	available              []string // the extensions it names that the server has
}

// catalog asks, in one round trip, what the server holds of each role and database, and which
// of the named extensions it has available (listing those reads every control file, so only
// where some are named).
func (b *Backend) catalog(ctx context.Context, roles, databases, named []string) ([]facts, map[string]bool, error) {
	batch := &pgx.Batch{}
	batch.Queue(`
SELECT r.oid IS NOT NULL, d.oid IS NOT NULL,
       coalesce(r.rolcanlogin, false),
       coalesce(r.rolsuper OR r.rolcreatedb OR r.rolcreaterole OR r.rolreplication OR r.rolbypassrls, false),
       coalesce(r.rolvaliduntil <= now(), false),
       r.rolpassword, pg_catalog.shobj_description(r.oid, 'pg_authid'),
       coalesce(d.datdba = r.oid, false),
       coalesce(pg_catalog.has_database_privilege('public', d.oid, 'CONNECT'), false)
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS w (role, db, i)
LEFT JOIN pg_catalog.pg_authid r ON r.rolname = w.role
LEFT JOIN pg_catalog.pg_database d ON d.datname = w.db
ORDER BY w.i`, roles, databases)
	if len(named) > 0 {
		batch.Queue("SELECT name::text FROM pg_catalog.pg_available_extensions WHERE name = ANY($1)", named)
	}
	results := b.pool.SendBatch(ctx, batch)
	defer results.Close()
	rows, err := results.Query()
	if err != nil {
		return nil, nil, err
	}
	out := make([]facts, 0, len(roles))
	var f facts
	_, err = pgx.ForEachRow(rows, []any{&f.role, &f.database, &f.login, &f.powers, &f.expired, &f.stored, &f.comment,
		&f.owner, &f.publicConnect}, func() error {
		out = append(out, f)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	available := map[string]bool{}
	if len(named) > 0 {
		rows, err := results.Query()
		if err != nil {
			return nil, nil, err
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, nil, err
		}
		for _, x := range names {
			available[x] = true
		}
	}
	return out, available, nil
}

// drift is what differs between what the catalog says of a consumer and what Create makes, in
// words an operator reads; empty where nothing does. The extensions are looked into apart.
func (b *Backend) drift(f facts) []string {
	var d []string
	if !f.role {
		return append(d, "role missing")
	}
	if r, ok := parseRecord(f.comment); !ok || r.Resource != b.resource {
		d = append(d, "not recorded as the provider's")
	} else if r.State != active {
		d = append(d, "recorded withdrawn")
	}
	if !f.login {
		d = append(d, "login")
	}
	if f.powers {
		d = append(d, "powers")
	}
	if f.expired {
		d = append(d, "expired")
	}
	if !f.verifies {
		d = append(d, "password")
	}
	switch {
	case !f.database:
		d = append(d, "database missing")
	case !f.owner:
		d = append(d, "owner")
	}
	if f.publicConnect {
		d = append(d, "PUBLIC can connect")
	}
	return d
}

// missingExtensions is which of names are not installed in db, asked on a read-only
// connection of its own.
func (b *Backend) missingExtensions(ctx context.Context, db string, names []string) ([]string, error) {
	conn, err := b.connectTo(ctx, db, true)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, "SELECT extname::text FROM pg_catalog.pg_extension WHERE extname = ANY($1)", names)
	if err != nil {
		return nil, err
	}
	installed, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, x := range names {
		if !slices.Contains(installed, x) {
			missing = append(missing, x)
		}
	}
	return missing, nil
}
