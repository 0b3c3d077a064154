// The provider's locks: the per-login advisory lock a Create, Remove or Drop runs under, and
// what it does about whoever holds one of its keys, or a managed role's row, in its way.

package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Advisory locks are per database, and any login that may connect to the provider's database
// (PUBLIC may connect to postgres by default) may take one: a consumer's key and the lease's
// are no secret. A session that is not a superuser's and holds or waits for one of the
// provider's locks is therefore nobody the provider waits for: it is ended, and said. Another
// provider, or another replica, connects as a superuser and is waited for as before.
//
// A prepared transaction (where max_prepared_transactions > 0) keeps its locks, and the rows it
// changed, with no session to end: one that is not a superuser's and holds one of the
// provider's locks, or a managed role's row, is rolled back, and said. A superuser's is nobody's
// to undo but an operator's: it is said loudly, and the provider is not ready while it lasts.

// loginKey and leaseKey are the provider's advisory lock keys, of $1: a consumer's login, or
// the resource. A login holds no '/', so the two never meet.
const (
	loginKey = "pg_catalog.hashtextextended('novox-provisioner/' || $1, 0)"
	leaseKey = "pg_catalog.hashtextextended('novox-provisioner-leader/' || $1, 0)"
)

// loginLocks takes a consumer's advisory lock, and ends what holds it where the provider may:
// given what it needs of the Backend when the Backend is made.
type loginLocks struct {
	pool    *pgxpool.Pool
	timeout time.Duration // all of a locked call
	wait    time.Duration // lock_timeout: a longer wait for somebody else's lock is transient
	reach   *reach
	conns   *databaseConns
	voice   voice
	blocked *blockedBy
}

// locked runs fn on one connection while it holds the advisory lock for the consumer's login,
// all within the Backend's timeout, under the powers p of the act it is part of. The lock is
// the server's, so two providers, or two Creates here, never interleave on one consumer.
func (l *loginLocks) locked(ctx context.Context, role string, p powers, fn func(context.Context, *pgxpool.Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return l.reach.connectError(err)
	}
	defer conn.Release()
	// Transaction sampling is decided as a transaction starts, so it is turned off for the
	// session here, before the role's transaction, which may carry a verifier. Only a superuser
	// may; a server that samples is refused in delegated mode (quiet). Whether a prepared
	// transaction holds the role's row is asked in the same statement (pg_authid: a superuser's
	// question only).
	sampling, rowHeld := "true", "false"
	if p.quiets {
		sampling = "pg_catalog.set_config('log_transaction_sample_rate', '0', false) IS NOT NULL"
	}
	if p.seesPrepared {
		rowHeld = rowHeldSQL
	}
	var took, heldRow bool
	err = conn.QueryRow(ctx, "SELECT pg_catalog.pg_try_advisory_lock("+loginKey+"), "+sampling+", "+rowHeld, role).Scan(&took, new(bool), &heldRow)
	if err == nil && !took {
		// Held, or waited for, by somebody: sessions and prepared transactions that are not a
		// superuser's are ended (a consumer may take another's key in the provider's
		// database); another provider's are waited for, at most lock_timeout.
		if _, err = l.evict(ctx, conn.Conn(), p, loginKey, role, "the provider's lock of "+role); err == nil {
			_, err = conn.Exec(ctx, "SELECT pg_catalog.pg_advisory_lock("+loginKey+")", role)
		}
	}
	if err == nil && heldRow {
		// A prepared transaction changed the role (ALTER ROLE self ...; PREPARE TRANSACTION):
		// every statement on the role would wait for it to its lock_timeout, every pass.
		err = l.freeRow(ctx, conn.Conn(), p, role)
	}
	if err != nil {
		return lockError(fmt.Errorf("lock %s: %w", role, err), l.wait)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, "SELECT pg_catalog.pg_advisory_unlock("+loginKey+")", role); err != nil {
			// A session that cannot unlock must not go back to the pool holding the lock.
			_ = conn.Conn().Close(uctx)
		}
	}()
	return lockError(fn(ctx, conn), l.wait)
}

// lockError says where err is a statement that waited on somebody else's lock for longer than
// the lock timeout (wait), which is transient. Whether and when it is tried again is the loop's
// to say.
func lockError(err error, wait time.Duration) error {
	if pgCode(err) == lockNotAvailable {
		return transient(fmt.Errorf("%w: another session held a lock it needs for more than %s (an open transaction on the role?)",
			err, wait))
	}
	return err
}

// holdersOf is the query that answers who, but this session, holds or waits for the advisory
// lock of key in this database: sessions (pid, with gid "") and prepared transactions (gid and
// database, pid 0), whether a superuser's or a session of the provider's own role, and whether
// the lock is granted. A bigint key is
// classid (its high half) and objid (its low half) in pg_locks, objsubid 1. A prepared
// transaction's locks have no pid: it is found by its transaction id, which it holds under the
// same virtual transaction.
func holdersOf(key string) string {
	return `WITH k AS (SELECT ` + key + ` AS key),
l AS (SELECT l.* FROM pg_catalog.pg_locks l, k WHERE l.locktype = 'advisory' AND l.objsubid = 1
      AND l.classid = ((k.key >> 32) & 4294967295)::pg_catalog.oid AND l.objid = (k.key & 4294967295)::pg_catalog.oid
      AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database()))
SELECT a.usename::text, r.rolsuper OR a.usesysid = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = session_user), a.pid, '', '', l.granted
FROM l JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid JOIN pg_catalog.pg_roles r ON r.oid = a.usesysid
WHERE a.pid <> pg_catalog.pg_backend_pid()
UNION ALL
SELECT p.owner::text, coalesce(r.rolsuper, false), 0, p.gid, p.database::text, l.granted
FROM l JOIN pg_catalog.pg_locks x ON x.locktype = 'transactionid' AND x.pid IS NULL AND x.virtualtransaction = l.virtualtransaction
JOIN pg_catalog.pg_prepared_xacts p ON p.transaction = x.transactionid
LEFT JOIN pg_catalog.pg_roles r ON r.rolname = p.owner
WHERE l.pid IS NULL`
}

// rowHoldersSQL answers the prepared transactions that changed or locked the row of the role
// $1 (its xmax), in the columns of holdersOf.
const rowHoldersSQL = `SELECT p.owner::text, coalesce(r.rolsuper, false), 0, p.gid, p.database::text, true
FROM pg_catalog.pg_authid a JOIN pg_catalog.pg_prepared_xacts p ON p.transaction = a.xmax
LEFT JOIN pg_catalog.pg_roles r ON r.rolname = p.owner
WHERE a.rolname = $1`

// rowHeldSQL is whether a prepared transaction holds the row of the role $1: asked with the
// lock, so that a Create pays no round trip for it.
const rowHeldSQL = `EXISTS (SELECT 1 FROM pg_catalog.pg_authid a JOIN pg_catalog.pg_prepared_xacts p ON p.transaction = a.xmax
WHERE a.rolname = $1)`

// holder is one session or prepared transaction that holds or waits for a lock.
type holder struct {
	user string
	// super: a superuser's, or a session of the provider's own role (another replica, or
	// this one's, in delegated mode too): waited for, never ended.
	super    bool
	pid      int
	gid      string // a prepared transaction's, "" for a session
	database string // a prepared transaction's
	granted  bool
}

func (h holder) prepared() bool { return h.gid != "" }

// holders runs sql (holdersOf or rowHoldersSQL) for arg.
func holders(ctx context.Context, conn *pgx.Conn, sql, arg string) ([]holder, error) {
	rows, err := conn.Query(ctx, sql, arg)
	if err != nil {
		return nil, err
	}
	var out []holder
	var h holder
	_, err = pgx.ForEachRow(rows, []any{&h.user, &h.super, &h.pid, &h.gid, &h.database, &h.granted}, func() error {
		out = append(out, h)
		return nil
	})
	return out, err
}

// eviction is how what holds or waits for the provider's locks is ended: what is said, and
// how a prepared transaction is rolled back.
type eviction struct {
	// say says text: what was ended, or, loudly, a superuser's prepared transaction. key names
	// what it says of, and not a session's pid: one that keeps taking the lock opens a new
	// session, with a new pid, each time.
	say func(level slog.Level, key, text string)
	// rollback runs ROLLBACK PREPARED gid in database db: it must run there. nil where the
	// provider may not (it is not a superuser).
	rollback func(ctx context.Context, db, gid string) error
	// blocked, where not nil, is told a superuser's prepared transaction in the way.
	blocked func(h holder, what string)
}

// end ends every holder in hs that is not a superuser's: sessions are terminated, prepared
// transactions rolled back, each said. A superuser's prepared transaction that holds the lock
// is said loudly and told to blocked. It answers how many it ended.
func (e eviction) end(ctx context.Context, conn *pgx.Conn, hs []holder, what string) (int, error) {
	var pids []int
	n := 0
	for _, h := range hs {
		switch {
		case h.super && h.prepared() && h.granted:
			text := fmt.Sprintf("prepared transaction %q of the superuser %s in %s holds %s: nothing the provider does "+
				"with it can finish until an operator ends it (COMMIT PREPARED or ROLLBACK PREPARED, in %s)",
				h.gid, h.user, h.database, what, h.database)
			e.say(slog.LevelError, text, text)
			if e.blocked != nil {
				e.blocked(h, what)
			}
		case h.super:
		case h.prepared() && e.rollback == nil:
			text := fmt.Sprintf("prepared transaction %q of %s in %s holds %s, and the provider may not roll it "+
				"back: an operator must end it (ROLLBACK PREPARED, in %s)", h.gid, h.user, h.database, what, h.database)
			e.say(slog.LevelError, text, text)
			if e.blocked != nil {
				e.blocked(h, what)
			}
		case h.prepared():
			if err := e.rollback(ctx, h.database, h.gid); err != nil {
				if pgCode(err) == undefinedObject { // committed or rolled back meanwhile
					continue
				}
				return n, fmt.Errorf("roll back prepared transaction %q: %w", h.gid, err)
			}
			n++
			text := fmt.Sprintf("rolled back prepared transaction %q of %s, which is not a superuser and held %s", h.gid, h.user, what)
			e.say(slog.LevelWarn, text, text)
		default:
			pids = append(pids, h.pid)
		}
	}
	if len(pids) == 0 {
		return n, nil
	}
	ended, err := terminate(ctx, conn, listed, pids)
	for _, pid := range pids { // said in the order they were found
		i := slices.IndexFunc(ended, func(s session) bool { return s.pid == pid })
		if i < 0 || !ended[i].ended {
			continue
		}
		n++
		held := fmt.Sprintf("%s, which is not a superuser and held or waited for %s", ended[i].user, what)
		e.say(slog.LevelWarn, held, fmt.Sprintf("ended session %d of %s", pid, held))
	}
	return n, err
}

// rollbackOn is a rollback for prepared transactions of conn's database only, where the
// provider's advisory locks are (a prepared transaction's locks are those of its database).
func rollbackOn(conn *pgx.Conn) func(ctx context.Context, db, gid string) error {
	return func(ctx context.Context, db, gid string) error {
		if db != conn.Config().Database {
			return fmt.Errorf("prepared transaction %q is in %s, not %s", gid, db, conn.Config().Database)
		}
		_, err := conn.Exec(ctx, "ROLLBACK PREPARED "+literal(gid))
		return err
	}
}

// rollback runs ROLLBACK PREPARED gid in db, on conn where that is its database, else on a
// connection of its own there.
func (l *loginLocks) rollback(conn *pgx.Conn) func(ctx context.Context, db, gid string) error {
	return func(ctx context.Context, db, gid string) error {
		if db == conn.Config().Database {
			return rollbackOn(conn)(ctx, db, gid)
		}
		other, err := l.conns.open(ctx, db, false)
		if err != nil {
			return err
		}
		defer other.Close(context.WithoutCancel(ctx))
		return rollbackOn(other.Conn)(ctx, db, gid)
	}
}

// evict ends the sessions, but superusers', that hold or wait for the lock of key for arg,
// and rolls back the prepared transactions, but superusers', that hold it, each said; a
// superuser's prepared transaction that holds it is said loudly. It answers how many it ended.
func (l *loginLocks) evict(ctx context.Context, conn *pgx.Conn, p powers, key, arg, what string) (int, error) {
	hs, err := holders(ctx, conn, holdersOf(key), arg)
	if err != nil {
		return 0, err
	}
	return l.eviction(arg, conn, p).end(ctx, conn, hs, what)
}

// freeRow rolls back the prepared transactions, but superusers', that hold the row of role, each
// said; a superuser's is said loudly.
func (l *loginLocks) freeRow(ctx context.Context, conn *pgx.Conn, p powers, role string) error {
	hs, err := holders(ctx, conn, rowHoldersSQL, role)
	if err != nil {
		return err
	}
	_, err = l.eviction(role, conn, p).end(ctx, conn, hs, "the row of role "+role)
	return err
}

// eviction is how the Backend ends what holds the locks of the consumer: said on it, once per
// consumer and what was ended (whose session or prepared transaction, and which lock), and a
// superuser's prepared transaction kept as the reason the provider is not ready.
func (l *loginLocks) eviction(consumer string, conn *pgx.Conn, p powers) eviction {
	e := eviction{
		say: func(level slog.Level, key, text string) {
			l.voice.once(sayKey{consumer, lockHolderEnded, key}, "said", level, "%s: %s", consumer, text)
		},
		rollback: l.rollback(conn),
		blocked: func(h holder, what string) {
			who := h.user
			if h.super {
				who = "the superuser " + who
			}
			l.blocked.add(h, fmt.Sprintf("prepared transaction %q of %s in %s holds %s", h.gid, who, h.database, what))
		},
	}
	if !p.seesPrepared {
		e.rollback = nil
	}
	return e
}

// blockedBy are the superusers' prepared transactions found in the provider's way, and why,
// until they are gone. It is safe for concurrent use.
type blockedBy struct {
	mu  sync.Mutex
	why map[[2]string]string // database and gid: what it holds
}

func (s *blockedBy) add(h holder, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.why == nil {
		s.why = map[[2]string]string{}
	}
	s.why[[2]string{h.database, h.gid}] = why
}

// keep forgets those of the prepared transactions that are not in still.
func (s *blockedBy) keep(still map[[2]string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.why {
		if !still[k] {
			delete(s.why, k)
		}
	}
}

// text is every reason, in a fixed order, "" where there is none.
func (s *blockedBy) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, why := range s.why {
		out = append(out, why)
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}
