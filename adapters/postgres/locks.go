package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Advisory locks are per database, and any login that may connect to the provider's database
// (PUBLIC may connect to postgres by default) may take one: a consumer's key and the lease's
// are no secret. A session that is not a superuser's and holds or waits for one of the
// provider's locks is therefore nobody the provider waits for: it is ended, and said. Another
// provider, or another replica, connects as a superuser and is waited for as before.

// loginKey and leaseKey are the provider's advisory lock keys, of $1: a consumer's login, or
// the resource. A login holds no '/', so the two never meet.
const (
	loginKey = "pg_catalog.hashtextextended('novox-provisioner/' || $1, 0)"
	leaseKey = "pg_catalog.hashtextextended('novox-provisioner-leader/' || $1, 0)"
)

// evictFrom is the query that ends the sessions, but superusers', that hold or wait for the
// advisory lock of key in this database, and answers whose they were. A bigint key is
// classid (its high half) and objid (its low half) in pg_locks, objsubid 1.
func evictFrom(key string) string {
	return `SELECT a.usename::text, a.pid, pg_catalog.pg_terminate_backend(a.pid)
FROM (SELECT ` + key + ` AS key) k
JOIN pg_catalog.pg_locks l ON l.locktype = 'advisory' AND l.objsubid = 1
     AND l.classid = ((k.key >> 32) & 4294967295)::pg_catalog.oid AND l.objid = (k.key & 4294967295)::pg_catalog.oid
     AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())
JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
JOIN pg_catalog.pg_roles r ON r.oid = a.usesysid
WHERE NOT r.rolsuper AND a.pid <> pg_catalog.pg_backend_pid()`
}

// evict ends the sessions, but superusers', that hold or wait for the lock of key for arg, and
// says each one it ended through say. It answers how many it ended.
func evict(ctx context.Context, conn *pgx.Conn, key, arg, what string, say func(string)) (int, error) {
	rows, err := conn.Query(ctx, evictFrom(key), arg)
	if err != nil {
		return 0, err
	}
	var (
		user  string
		pid   int
		ended bool
		n     int
	)
	_, err = pgx.ForEachRow(rows, []any{&user, &pid, &ended}, func() error {
		if ended {
			n++
			say(fmt.Sprintf("ended session %d of %s, which is not a superuser and held or waited for %s", pid, user, what))
		}
		return nil
	})
	return n, err
}

// sayLock is how the Backend says an eviction: as a warning, on the consumer it concerns, once
// per consumer and cause (whose session, and which lock): a consumer that keeps taking the lock
// opens a new session, with a new pid, each time.
func (b *Backend) sayLock(consumer string) func(string) {
	return func(text string) {
		_, cause, _ := strings.Cut(text, " of ") // "ended session <pid> of <user>, which ... <lock>"
		if b.said.first(consumer+"/ended/"+cause, "said") {
			b.say(slog.LevelWarn, consumer, "%s: %s", consumer, text)
		}
	}
}
