// SQL helpers: quoting what the checks let through, and collecting a column.

package postgres

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ident quotes a name that checkName or checkExtension has let through.
func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// literal quotes a string constant for the statements that take no parameters (ALTER ROLE).
// The server runs with standard_conforming_strings on (its default since 9.1): only quotes need
// doubling.
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// collect is the first column of every row sql answers.
func collect(ctx context.Context, conn *pgxpool.Conn, sql string, args ...any) ([]string, error) {
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
