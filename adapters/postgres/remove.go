package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Remove withdraws the login as. Retain: the role loses LOGIN and its sessions end; the
// database stays. Drop: sessions end, the role's database (derived.database, else every one it
// owns) is dropped, then the role. Both are no-ops for what is already gone.
func (b *Backend) Remove(ctx context.Context, as string, derived map[string]any) error {
	if err := b.checkName("login", as); err != nil {
		return err
	}
	named, err := databaseOf("", nil, derived)
	if err != nil {
		return err
	}
	if named != "" {
		if err := b.checkName("database", named); err != nil {
			return err
		}
	}
	return b.locked(ctx, as, func(ctx context.Context, conn *pgxpool.Conn) error {
		if b.policy == Retain {
			_, err := conn.Exec(ctx, "ALTER ROLE "+ident(as)+" NOLOGIN")
			if pgCode(err) == undefinedObject {
				return nil
			}
			if err != nil {
				return fmt.Errorf("withdraw login %s: %w", as, err)
			}
			return endSessions(ctx, conn, as)
		}
		if err := endSessions(ctx, conn, as); err != nil {
			return err
		}
		rows, err := conn.Query(ctx, `SELECT datname::text FROM pg_database
WHERE datdba = (SELECT oid FROM pg_roles WHERE rolname = $1) AND ($2 = '' OR datname = $2)`, as, named)
		if err != nil {
			return fmt.Errorf("list databases of %s: %w", as, err)
		}
		dbs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("list databases of %s: %w", as, err)
		}
		for _, db := range dbs {
			if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(db)+" WITH (FORCE)"); err != nil {
				return fmt.Errorf("drop database %s: %w", db, err)
			}
		}
		if _, err := conn.Exec(ctx, "DROP ROLE IF EXISTS "+ident(as)); err != nil {
			return fmt.Errorf("drop role %s: %w", as, err)
		}
		return nil
	})
}

// endSessions ends every session of role.
func endSessions(ctx context.Context, conn *pgxpool.Conn, role string) error {
	_, err := conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1 AND pid <> pg_backend_pid()", role)
	if err != nil {
		return fmt.Errorf("end sessions of %s: %w", role, err)
	}
	return nil
}
