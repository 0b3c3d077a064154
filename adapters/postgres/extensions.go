package postgres

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ensureExtensions creates, in the consumer's database and as the provider, each named
// extension the server has available, with what it depends on. One the server lacks is said
// and skipped.
func (b *Backend) ensureExtensions(ctx context.Context, conn *pgxpool.Conn, pl plan) error {
	if len(pl.extensions) == 0 {
		return nil
	}
	available, err := availableOf(ctx, conn, pl.extensions)
	if err != nil {
		return fmt.Errorf("list available extensions: %w", err)
	}
	for _, name := range pl.extensions {
		if !available[name] {
			b.say(slog.LevelWarn, pl.role, "%s: extension %s is not available on this server; skipped", pl.role, name)
		}
	}
	if len(available) == 0 {
		return nil
	}
	db, err := b.connectTo(ctx, pl.database, false)
	if err != nil {
		return fmt.Errorf("create extensions in %s: %w", pl.database, err)
	}
	defer db.Close(context.WithoutCancel(ctx))
	for _, name := range pl.extensions {
		if !available[name] {
			continue
		}
		if _, err := db.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS "+ident(name)+" CASCADE"); err != nil {
			return fmt.Errorf("create extension %s in %s: %w", name, pl.database, err)
		}
	}
	return nil
}

// availableOf is which of names the server has available.
func availableOf(ctx context.Context, q querier, names []string) (map[string]bool, error) {
	rows, err := q.Query(ctx, "SELECT name FROM pg_available_extensions WHERE name = ANY($1)", names)
	if err != nil {
		return nil, err
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(found))
	for _, name := range found {
		out[name] = true
	}
	return out, nil
}
