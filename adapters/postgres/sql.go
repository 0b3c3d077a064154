// SQL helpers: quoting what the checks let through, and reading the server's errors.

package postgres

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SQLSTATEs this adapter tells apart.
const (
	undefinedObject       = "42704"
	duplicateDatabase     = "42P04"
	uniqueViolation       = "23505"
	lockNotAvailable      = "55P03"
	insufficientPrivilege = "42501"
)

// ident quotes a name that checkName or checkExtension has let through.
func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// literal quotes a string constant for the statements that take no parameters (ALTER ROLE).
// The server runs with standard_conforming_strings on (its default since 9.1): only quotes need
// doubling.
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// pgMessage is the server's message of err, or err's text where it is not from the server.
func pgMessage(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Message
	}
	return err.Error()
}

// pgCode is err's SQLSTATE, or "" where err is not from the server.
func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// collect is the first column of every row sql answers.
func collect(ctx context.Context, conn *pgxpool.Conn, sql string, args ...any) ([]string, error) {
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
