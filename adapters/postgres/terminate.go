// Ending sessions: a withdrawn role's, others' in a consumer's database, the provider's own
// before it drops one; where the provider may end them.

package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// sessions selects, in pg_stat_activity a joined to the session's role r, sessions one of the
// provider's statements ends; never the one that asks.
type sessions string

const (
	// ofRole are every session of the role $1.
	ofRole sessions = `a.usename = $1`
	// othersIn are the sessions in the database $1 of everyone but its owner, the role $2, and
	// superusers, that the provider may end.
	othersIn sessions = `a.datname = $1 AND a.usename <> $2 AND NOT r.rolsuper
  AND (pg_catalog.pg_has_role('pg_signal_backend', 'USAGE') OR pg_catalog.pg_has_role(a.usesysid, 'USAGE'))`
	// ownIn are the provider's own sessions in the database $1.
	ownIn sessions = `a.datname = $1 AND a.usename = current_user`

	// listed are the sessions whose pids are in $1 (holders found in the provider's way).
	listed sessions = `a.pid = ANY($1::int[])`
)

// ending is the statement that ends the sessions which selects: a row for each, its pid, its
// user, and whether it ended.
func ending(which sessions) string {
	return `SELECT a.pid, a.usename::text, pg_catalog.pg_terminate_backend(a.pid) AS ended FROM pg_catalog.pg_stat_activity a
JOIN pg_catalog.pg_roles r ON r.oid = a.usesysid
WHERE a.pid <> pg_catalog.pg_backend_pid() AND ` + string(which)
}

// session is one session the provider asked to end.
type session struct {
	pid   int
	user  string
	ended bool // false where it was gone before it could be ended
}

// terminate ends the sessions which selects, and answers each it asked to end: the one way the
// provider ends sessions, whoever they are (ofRole, othersIn, ownIn, listed).
func terminate(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, which sessions, args ...any) ([]session, error) {
	rows, err := q.Query(ctx, ending(which), args...)
	if err != nil {
		return nil, err
	}
	var out []session
	var s session
	_, err = pgx.ForEachRow(rows, []any{&s.pid, &s.user, &s.ended}, func() error {
		out = append(out, s)
		return nil
	})
	return out, err
}

// endSessions ends every session of role, where the provider's role self may: whether it may
// and the ending are one statement. Where it may not, v tells it, naming what self lacks, until
// it may.
func endSessions(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, v voice, self, role string) error {
	var may bool
	err := q.QueryRow(ctx, `SELECT m.may, (SELECT count(e.ended) FROM (`+ending(ofRole)+` AND m.may) e) FROM (`+sqlMaySignal+` AS may) m`,
		role).Scan(&may, new(int))
	if err != nil {
		return fmt.Errorf("end sessions of %s: %w", role, err)
	}
	if !may {
		v.once(sayKey{role, signalLacked, ""}, "lacks", slog.LevelWarn, "%s: its sessions are not ended: "+
			"the provider's role %s may not end them (GRANT pg_signal_backend TO %s); they end when they disconnect",
			role, self, self)
		return nil
	}
	v.over(sayKey{role, signalLacked, ""})
	return nil
}

// endOwnSessions ends the provider's own sessions in db, and waits until they are gone.
func endOwnSessions(ctx context.Context, conn *pgxpool.Conn, db string) error {
	for {
		left, err := terminate(ctx, conn, ownIn, db)
		if err != nil || len(left) == 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the provider's own sessions in %s did not end: %w", db, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// sqlMaySignal is whether the provider may end the sessions of the role $1: a superuser, a
// member of pg_signal_backend, or one that has the role's privileges.
const sqlMaySignal = `SELECT pg_catalog.pg_has_role('pg_signal_backend', 'USAGE') OR pg_catalog.pg_has_role($1::text::name, 'USAGE')`
