package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/novox/postgres-provider/tests/pgserver"
)

// The role's transaction has the verdict's observation planned generically, once a session,
// where the server would otherwise plan it anew for each consumer (it never leaves custom
// plans for this query); the setting is the transaction's only, and the server's logging is
// quieted only where the provider quiets it.
func TestTheRoleTransactionPlansTheObservationOnce(t *testing.T) {
	is := is.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgserver.Shared(t).URL)
	is.NoErr(err)
	defer conn.Close(context.WithoutCancel(ctx))
	p := powers{readsVerifiers: true}
	plans := func() (generic, custom int64) {
		is.NoErr(conn.QueryRow(ctx, "SELECT generic_plans, custom_plans FROM pg_catalog.pg_prepared_statements WHERE statement = $1",
			observeSQL(forVerdict, p.readsVerifiers)).Scan(&generic, &custom))
		return generic, custom
	}
	setting := func(name string) (v string) {
		is.NoErr(conn.QueryRow(ctx, "SELECT pg_catalog.current_setting($1)", name).Scan(&v))
		return v
	}
	_, err = conn.Exec(ctx, "SET plan_cache_mode = auto") // the server's default, whatever this one's is
	is.NoErr(err)
	logged := setting("log_statement")

	// Outside the role's transaction, the server plans the observation for each consumer.
	for _, role := range []string{"plan_a", "plan_b"} {
		_, err := observe(ctx, conn, p, role, role, forVerdict)
		is.NoErr(err)
	}
	generic, custom := plans()
	is.Equal(generic, int64(0))
	is.Equal(custom, int64(2))

	for _, quiets := range []bool{false, true} {
		tx, err := conn.Begin(ctx)
		is.NoErr(err)
		_, err = tx.Exec(ctx, roleTxSQL(quiets))
		is.NoErr(err)
		_, err = observe(ctx, tx, p, "plan_c", "plan_c", forVerdict)
		is.NoErr(err)
		if quiets {
			is.Equal(setting("log_statement"), "none") // quieted as a superuser quiets it
		} else {
			is.Equal(setting("log_statement"), logged) // a provider that is not a superuser sets none
		}
		is.NoErr(tx.Commit(ctx))
		g, c := plans()
		is.Equal(g, generic+1) // planned generically in the role's transaction
		is.Equal(c, custom)    // and not planned for the consumer
		generic = g
	}
	is.Equal(setting("plan_cache_mode"), "auto") // the transaction's setting only
	is.Equal(setting("log_statement"), logged)
}

// A check's catalog query is planned generically where the Backend acts, once a session for
// any number of consumers (the server's custom plans for it grow far faster than the
// consumers), the setting being its round trip's only; a Backend that only looks (a plan)
// sets nothing, and the server plans it as it chooses.
func TestTheChecksCatalogQueryIsPlannedOnce(t *testing.T) {
	is := is.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, pgserver.Shared(t).URL)
	is.NoErr(err)
	defer pool.Close()
	conn, err := pool.Acquire(ctx)
	is.NoErr(err)
	defer conn.Release()
	plans := func(r reading) (generic, custom int64) {
		err := conn.QueryRow(ctx, "SELECT generic_plans, custom_plans FROM pg_catalog.pg_prepared_statements WHERE statement = $1",
			observeSQL(r, true)).Scan(&generic, &custom)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, 0
		}
		is.NoErr(err)
		return generic, custom
	}
	_, err = conn.Exec(ctx, "SET plan_cache_mode = auto") // the server's default, whatever this one's is
	is.NoErr(err)
	roles := []string{"catalog_a", "catalog_b", "catalog_c"}

	for range 2 { // a plan's
		_, _, err := catalog(ctx, conn, false, forPlan, true, roles, roles, nil)
		is.NoErr(err)
	}
	generic, custom := plans(forPlan)
	is.Equal(generic, int64(0)) // planned as the server chooses: custom, for its first executions
	is.Equal(custom, int64(2))
	for range 2 { // a check's
		_, _, err := catalog(ctx, conn, true, forCheck, true, roles, roles, []string{"pg_trgm"})
		is.NoErr(err)
	}
	g, c := plans(forCheck)
	is.Equal(g, int64(2)) // planned generically
	is.Equal(c, int64(0)) // never for the consumers asked
	var mode string
	is.NoErr(conn.QueryRow(ctx, "SELECT pg_catalog.current_setting('plan_cache_mode')").Scan(&mode))
	is.Equal(mode, "auto") // the round trip's setting only
}
