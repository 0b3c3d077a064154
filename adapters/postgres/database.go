package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ensureDatabase creates the database owned by role, or checks that role owns it; a database
// owned by another role is never handed over. PUBLIC loses CONNECT and TEMPORARY on it.
func ensureDatabase(ctx context.Context, conn *pgxpool.Conn, db, role string) error {
	owner, err := ownerOf(ctx, conn, db)
	if err != nil {
		return err
	}
	if owner == "" {
		_, err := conn.Exec(ctx, "CREATE DATABASE "+ident(db)+" OWNER "+ident(role))
		if pgCode(err) == duplicateDatabase {
			// Made by someone else since we looked; whose it is decides.
			owner, err = ownerOf(ctx, conn, db)
		}
		if err != nil {
			return err
		}
		if owner == "" {
			owner = role
		}
	}
	if owner != role {
		return fmt.Errorf("the database exists and is owned by %q, not %q; it is not handed over", owner, role)
	}
	_, err = conn.Exec(ctx, "REVOKE CONNECT, TEMPORARY ON DATABASE "+ident(db)+" FROM PUBLIC")
	return err
}

// ownerOf is the name of db's owner, or "" where there is no such database.
func ownerOf(ctx context.Context, conn *pgxpool.Conn, db string) (string, error) {
	var owner string
	err := conn.QueryRow(ctx, "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = $1", db).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return owner, err
}
