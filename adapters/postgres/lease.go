// The Lease: a session-level advisory lock of the resource, on a connection of its own.

package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/novox/postgres-provider/ports"
)

// Lease is the leader lock of one resource among the replicas of a provider: a session-level
// advisory lock on a connection of its own. The replica whose session holds it acts; the others
// stand by and try again on each pass. The server frees the lock when that session ends, so a
// leader that dies gives it up once the server notices, which TCP keepalives on the session,
// both ways, bring down to seconds. It is safe for concurrent use.
type Lease struct {
	cfg         *pgx.ConnConfig
	resource    string
	serverError func(error) error
	inRecovery  func(*pgconn.PgConn) error
	log         ports.Logger
	timeout     time.Duration

	mu     sync.Mutex
	conn   *pgx.Conn
	said   string // what was last said of the lease, so that each change is said once
	leader bool
	// back is how many more asks a replica that lost the lease lets pass before it tries to
	// take it again: its session ended under it, so a standby whose session did not is
	// given the first go.
	back int
}

// stepBack is Lease.back after a loss.
const stepBack = 2

var _ ports.Lease = (*Lease)(nil)

// Keepalives on the lease's session: the server drops the session of a replica it has not
// heard from for idle + interval×count (11 s), and so frees the lock; the replica notices a
// server it cannot hear within the same.
const (
	keepaliveIdle     = 5 * time.Second
	keepaliveInterval = 2 * time.Second
	keepaliveCount    = 3
)

// Lease returns the leader lock of the Backend's resource. Nothing is connected until Held is
// first called.
func (b *Backend) Lease() *Lease {
	cfg := b.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = b.conns.application() + "/lease"
	// The server's side of the keepalives, for this session only.
	cfg.RuntimeParams["tcp_keepalives_idle"] = strconv.Itoa(int(keepaliveIdle.Seconds()))
	cfg.RuntimeParams["tcp_keepalives_interval"] = strconv.Itoa(int(keepaliveInterval.Seconds()))
	cfg.RuntimeParams["tcp_keepalives_count"] = strconv.Itoa(keepaliveCount)
	cfg.RuntimeParams["tcp_user_timeout"] = strconv.Itoa(int((keepaliveIdle + keepaliveCount*keepaliveInterval).Milliseconds()))
	dialer := &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAliveConfig: net.KeepAliveConfig{
		Enable: true, Idle: keepaliveIdle, Interval: keepaliveInterval, Count: keepaliveCount}}
	cfg.DialFunc = dialer.DialContext
	return &Lease{cfg: cfg, resource: b.resource, serverError: b.reach.serverError, inRecovery: b.reach.inRecovery, log: b.voice.log, timeout: 5 * time.Second}
}

// Held answers nil while this replica holds the lease: it checks that the lease's session is
// alive (a session-level advisory lock lives as long as its session) on a server that is not in
// recovery, and where this replica holds no lease, tries to take it. A standby (advisory locks
// work there too, and lead nobody) is never leased: its error is of kind ports.ErrInRecovery.
// Each change (taken, standing by, lost) is said once.
func (l *Lease) Held(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	if l.conn != nil {
		var recovery bool
		err := l.conn.QueryRow(ctx, "SELECT pg_catalog.pg_is_in_recovery()").Scan(&recovery)
		if err == nil && !recovery {
			return nil
		}
		if err == nil {
			err = l.inRecovery(l.conn.PgConn())
		} else {
			err = l.serverError(err)
		}
		_ = l.conn.Close(context.WithoutCancel(ctx))
		l.conn = nil
		if l.leader {
			l.leader, l.back = false, stepBack
			l.tell(slog.LevelError, fmt.Sprintf("lost the lease of %s: %v; not acting until it is taken again", l.resource, err))
		}
	}
	if l.back > 0 {
		l.back--
		return fmt.Errorf("stepping back after losing the lease: %w", ports.ErrStandby)
	}
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		return l.serverError(err)
	}
	took, template, recovery, err := l.try(ctx, conn)
	if err == nil && recovery {
		standby := l.inRecovery(conn.PgConn())
		_ = conn.Close(context.WithoutCancel(ctx))
		return standby
	}
	if err == nil && template {
		_ = conn.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("the provider's database %s is a template: a session there makes every CREATE DATABASE fail; "+
			"name another (--provider-database)", l.cfg.Database)
	}
	if err == nil && !took {
		var blocked error
		took, blocked, err = l.takeFree(ctx, conn)
		if blocked != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
			return blocked
		}
	}
	if err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return l.serverError(err)
	}
	if !took {
		_ = conn.Close(context.WithoutCancel(ctx))
		l.tell(slog.LevelInfo, fmt.Sprintf("standing by: another replica holds the lease of %s", l.resource))
		return ports.ErrStandby
	}
	l.conn, l.leader = conn, true
	if l.said != "" { // a replica that simply takes the lease at its start says nothing, as a single one
		l.tell(slog.LevelInfo, fmt.Sprintf("acting: this replica now holds the lease of %s", l.resource))
	}
	return nil
}

// try tries to take the lease on conn, and answers whether conn's database is a template and
// whether its server is in recovery (where the lock is not taken).
func (l *Lease) try(ctx context.Context, conn *pgx.Conn) (took, template, recovery bool, err error) {
	err = conn.QueryRow(ctx, "SELECT coalesce(CASE WHEN NOT pg_catalog.pg_is_in_recovery() THEN pg_catalog.pg_try_advisory_lock("+leaseKey+") END, false), "+
		"(SELECT datistemplate FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database()), "+
		"pg_catalog.pg_is_in_recovery()", l.resource).Scan(&took, &template, &recovery)
	return took, template, recovery, err
}

// takeFree takes the lease that somebody else holds where that is no replica: a session or a
// prepared transaction that is not a superuser's (a consumer that took the lease's key in the
// provider's database) is ended, and the lease waited for, at most lock_timeout. While a
// replica (a superuser's session) holds it, nothing is ended. A superuser's prepared
// transaction that holds it is blocked: no replica acts until an operator ends it.
func (l *Lease) takeFree(ctx context.Context, conn *pgx.Conn) (took bool, blocked, err error) {
	hs, err := holders(ctx, conn, holdersOf(leaseKey), l.resource)
	if err != nil {
		return false, nil, err
	}
	for _, h := range hs {
		switch {
		case h.super && h.granted && !h.prepared():
			return false, nil, nil // another replica's
		case h.super && h.granted:
			return false, fmt.Errorf("prepared transaction %q of the superuser %s in %s holds the lease of %s: no replica "+
				"acts until an operator ends it (COMMIT PREPARED or ROLLBACK PREPARED, in %s)", h.gid, h.user, h.database, l.resource, h.database), nil
		}
	}
	say := func(level slog.Level, _, text string) {
		if l.log != nil {
			l.log.Log(ports.Entry{Level: level, Message: text})
		}
	}
	ended, err := eviction{say: say, rollback: rollbackOn(conn)}.end(ctx, conn, hs, "the lease of "+l.resource)
	if err != nil || ended == 0 {
		return false, nil, err
	}
	// The lock is free once what held it is gone: waited for, at most lock_timeout.
	_, err = conn.Exec(ctx, "SELECT pg_catalog.pg_advisory_lock("+leaseKey+")", l.resource)
	if pgCode(err) == lockNotAvailable { // another replica was quicker
		return false, nil, nil
	}
	return err == nil, nil, err
}

// Leader reports whether this replica held the lease when last asked.
func (l *Lease) Leader() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leader
}

// Close gives the lease up.
func (l *Lease) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
		defer cancel()
		_ = l.conn.Close(ctx)
		l.conn, l.leader = nil, false
	}
}

// tell says text where it differs from what was said last.
func (l *Lease) tell(level slog.Level, text string) {
	if text == l.said || l.log == nil {
		return
	}
	l.said = text
	l.log.Log(ports.Entry{Level: level, Message: text})
}
