// Connections: the pool's, and the short-lived ones to consumers' databases, each in one of
// the Backend's slots for them, all starting from the provider's known state.

package postgres

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// dbConn is a connection to a consumer's database, which holds one of the Backend's slots for
// such connections until it is closed.
type dbConn struct {
	*pgx.Conn
	release func()
}

// Close closes the connection and gives its slot back.
func (c *dbConn) Close(ctx context.Context) error {
	err := c.Conn.Close(ctx)
	c.release()
	return err
}

// databaseConns opens the provider's connections to consumers' databases, beside the pool: no
// more at once than it has slots, each from the pool's settings (the server's address, TLS,
// the version check every connection makes), trying first the host the Backend's sessions
// last reached, with the consumer's own defaults shut out.
type databaseConns struct {
	slots    chan struct{}
	base     *pgx.ConnConfig // the pool's, copied for each connection
	reach    *reach
	major    *atomic.Int32 // the server's major version, 0 until a session started
	readOnly bool          // the Backend's sessions are all read only already
}

// open opens a connection to db as the provider, once one of the slots is free; readOnly ones
// refuse every write.
func (c *databaseConns) open(ctx context.Context, db string, readOnly bool) (*dbConn, error) {
	release, err := c.slot(ctx)
	if err != nil {
		return nil, err
	}
	return c.openIn(ctx, db, readOnly, release)
}

// slot waits for one of the slots for connections to consumers' databases, and answers how to
// give it back.
func (c *databaseConns) slot(ctx context.Context) (release func(), err error) {
	select {
	case c.slots <- struct{}{}:
		return func() { <-c.slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// openIn opens a connection to db as the provider in a slot already taken, which release gives
// back (at once, where the connection cannot be opened).
func (c *databaseConns) openIn(ctx context.Context, db string, readOnly bool, release func()) (*dbConn, error) {
	cfg := c.config(db)
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	// The consumer owns its database, and may have set defaults for every session there: the
	// pool's known state (knownState) is copied, so none of them applies. Above all nothing the
	// provider runs there may resolve a name to an object the consumer made: the catalog alone is
	// searched (pg_temp, the session's own, is named last so that it is not searched first);
	// what the provider creates names its schema.
	sinceVersion(cfg.RuntimeParams, int(c.major.Load()))
	if readOnly && !c.readOnly { // a read-only Backend's sessions are already
		cfg.AfterConnect = readOnlyAfter(cfg.AfterConnect)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		release()
		return nil, err
	}
	return &dbConn{Conn: conn, release: release}, nil
}

// config is a copy of the pool's connection settings for a connection to db, trying first the
// host the Backend's sessions last reached.
func (c *databaseConns) config(db string) *pgx.ConnConfig {
	cfg := c.base.Copy()
	cfg.Database = db
	c.reach.first(cfg)
	return cfg
}

// application is the application_name of the Backend's sessions, each of them: which provider,
// and which replica of it, a session on the server is (the URL's, or one New makes up).
func (c *databaseConns) application() string { return c.base.RuntimeParams["application_name"] }

// logsIn is whether the consumer's role logs in to its database db with password, asked by
// logging in as it (a SCRAM exchange on a short-lived connection, in a slot of the Backend's
// budget for connections to consumers' databases that the caller holds): how a provider that
// cannot read stored verifiers checks the password. ok is false only where the server refused the password; any other
// refusal (the role's connection limit reached, no pg_hba.conf entry for the provider's host,
// the database not accepting connections) is an error: the password could not be checked.
func (c *databaseConns) logsIn(ctx context.Context, db, role, password string) (ok bool, err error) {
	cfg := c.config(db)
	cfg.User, cfg.Password = role, password
	cfg.RuntimeParams = map[string]string{"application_name": c.application()} // nothing else of the provider's
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if pgCode(err) == invalidPassword {
		return false, nil
	}
	if code := pgCode(err); code != "" {
		return false, fmt.Errorf("%s (%s)", pgMessage(err), code)
	}
	if err != nil {
		return false, err
	}
	return true, conn.Close(context.WithoutCancel(ctx))
}
