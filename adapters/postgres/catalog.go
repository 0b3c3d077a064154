// The catalog's side of a check: what the server holds of many consumers' roles and databases,
// in one round trip.

package postgres

import (
	"context"
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
		batch.Queue("SELECT name::text, coalesce(default_version::text, '') FROM pg_catalog.pg_available_extensions WHERE name = ANY($1)", named)
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
