package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ensureRole creates the role or brings it back to LOGIN with no powers and the verifier as its
// password, in a transaction that keeps the statement out of the server's log, even if it
// fails, and out of pg_stat_statements.
func ensureRole(ctx context.Context, conn *pgxpool.Conn, role, verifier string) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// One round trip: the settings (local to this transaction: is_local true), and whether
		// the role exists. pg_stat_statements' is a placeholder where it is not loaded.
		var exists bool
		err := tx.QueryRow(ctx, `SELECT set_config('log_statement', 'none', true),
       set_config('log_min_error_statement', 'panic', true),
       set_config('log_min_duration_statement', '-1', true),
       set_config('pg_stat_statements.track_utility', 'off', true),
       EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`, role).Scan(nil, nil, nil, nil, &exists)
		if err != nil {
			return err
		}
		verb := "CREATE"
		if exists {
			verb = "ALTER"
		}
		_, err = tx.Exec(ctx, verb+" ROLE "+ident(role)+" WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE"+
			" NOREPLICATION NOBYPASSRLS VALID UNTIL 'infinity' PASSWORD "+literal(verifier))
		return err
	})
}
