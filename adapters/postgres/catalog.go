// The catalog's side of a check and of a plan: what the server holds of many consumers' roles
// and databases, in one round trip.

package postgres

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// catalogWithin is catalog, as a check reads it, on a connection of the pool, within each
// from when it has one.
func (b *Backend) catalogWithin(ctx context.Context, each time.Duration, readsVerifiers bool, roles, databases, named []string) ([]observed, map[string]string, error) {
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Release()
	cctx, cancel := context.WithTimeout(ctx, each)
	defer cancel()
	return catalog(cctx, conn, !b.readOnly, forCheck, readsVerifiers, roles, databases, named)
}

// asking is what a catalog round trip asks of the consumers of wants that index names: their
// roles and databases, in that order, and the extensions any of them names, each once.
func asking(wants []wanted, index []int) (roles, databases, named []string) {
	roles, databases = make([]string, len(index)), make([]string, len(index))
	for k, i := range index {
		roles[k], databases[k] = wants[i].role, wants[i].database
		for _, x := range wants[i].extensions {
			if !slices.Contains(named, x) {
				named = append(named, x)
			}
		}
	}
	return roles, databases, named
}

// batchSender is what catalog sends its round trip on: a connection, or a transaction (a
// plan's, read only).
type batchSender interface {
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}

// catalog observes each consumer as r reads it (role and database, verifier included where
// the provider may read it: readsVerifiers) and asks which of the named extensions the server
// has available, at which default version (listing those reads every control file, so only
// where some are named), in one round trip. Where generic, the observation is planned once a
// session, for any number of consumers (sqlPlanOnce, local to the round trip's implicit
// transaction): the server's custom plans for it, which it makes for a statement's first
// executions on each session, took 1.2-1.7 s at 10,000 consumers where the generic plan takes
// 0.3 s. A Backend that only looks, and a plan, set nothing, and take the server's choice.
func catalog(ctx context.Context, conn batchSender, generic bool, r reading, readsVerifiers bool, roles, databases, named []string) ([]observed, map[string]string, error) {
	batch := &pgx.Batch{}
	if generic {
		batch.Queue(sqlPlanOnce)
	}
	batch.Queue(observeSQL(r, readsVerifiers), roles, databases, consumerSearchPath)
	if len(named) > 0 {
		batch.Queue(sqlAvailable, named)
	}
	results := conn.SendBatch(ctx, batch)
	defer results.Close()
	if generic {
		if _, err := results.Exec(); err != nil {
			return nil, nil, err
		}
	}
	rows, err := results.Query()
	if err != nil {
		return nil, nil, err
	}
	out, err := scanObserved(rows)
	if err != nil {
		return nil, nil, err
	}
	if len(named) == 0 {
		return out, map[string]string{}, nil
	}
	available, err := scanAvailable(results.Query())
	if err != nil {
		return nil, nil, err
	}
	return out, available, nil
}

// sqlAvailable asks which of the extensions $1 the server has available, at which default
// version: listing them reads every control file, so it is asked only where some are named.
const sqlAvailable = "SELECT name::text, coalesce(default_version::text, '') FROM pg_catalog.pg_available_extensions WHERE name = ANY($1)"

// scanAvailable reads sqlAvailable's rows: each extension's default version, by name.
func scanAvailable(rows pgx.Rows, err error) (map[string]string, error) {
	if err != nil {
		return nil, err
	}
	available := map[string]string{}
	var name, version string
	if _, err := pgx.ForEachRow(rows, []any{&name, &version}, func() error { available[name] = version; return nil }); err != nil {
		return nil, err
	}
	return available, nil
}

// availableWithin is sqlAvailable of named alone, on a connection of the pool, within each from
// when it has one (a plan's, which observed its consumers without it: Foresee).
func (b *Backend) availableWithin(ctx context.Context, each time.Duration, named []string) (map[string]string, error) {
	if len(named) == 0 {
		return map[string]string{}, nil
	}
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	cctx, cancel := context.WithTimeout(ctx, each)
	defer cancel()
	return scanAvailable(conn.Query(cctx, sqlAvailable, named))
}
