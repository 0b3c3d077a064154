// Create: one consumer's role, database and extensions brought into being, or back to
// exactly what it asks for, under its lock.

package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/novox/postgres-provider/ports"
)

// Create brings the consumer's role, database and extensions into being, or back to exactly
// what p says. Every name is checked before the first statement. Creates of one consumer,
// from this process or another provider on the same server, are serialised by an advisory lock.
func (b *Backend) Create(ctx context.Context, p ports.Provision) error {
	w, err := b.wantedOf(p)
	if err != nil {
		return err
	}
	if p.Password == "" {
		return invalid(fmt.Errorf("create role %s: the minted password is empty", w.role))
	}
	return b.locked(ctx, w.role, func(ctx context.Context, conn *pgxpool.Conn) error {
		if _, err := b.ensureRole(ctx, conn, w, p.Password); err != nil {
			return fmt.Errorf("create role %s: %w", w.role, err)
		}
		if err := b.ensureDatabase(ctx, conn, w.database, w.role); err != nil {
			return fmt.Errorf("create database %s: %w", w.database, err)
		}
		return b.ensureExtensions(ctx, conn, w)
	})
}
