// Archives: before a drop, each database the record names is dumped in the background, checked,
// and recorded on the server where the record outlives the drop; only then is it dropped.

package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/novox/postgres-provider/adapters/postgres/archive"
	"github.com/novox/postgres-provider/ports"
)

// The archives' record is a table in the provider's own database, in a schema of the provider's:
// a role's comment goes with the role at its drop, and this must outlive it. Every replica and
// `provisioner restore` read it there. A consumer may connect to that database, but may not
// create in it (CREATE on a database is nobody's by default), and the schema and the table are
// checked to be the provider's before anything is written to them.
const (
	archiveSchema = "novox_provisioner"
	archiveTable  = archiveSchema + ".archives"
)

const sqlArchiveTable = `CREATE TABLE IF NOT EXISTS ` + archiveTable + ` (
	name text PRIMARY KEY,
	resource text NOT NULL,
	login text NOT NULL,
	database text NOT NULL,
	database_oid oid NOT NULL,
	place text NOT NULL,
	size bigint NOT NULL,
	sha256 text NOT NULL,
	server_version text NOT NULL,
	made_at timestamptz NOT NULL,
	record jsonb NOT NULL,
	deleted_at timestamptz)`

// archives are the dumps the Backend takes before drops: at most one a database, Parallel at
// once, each on the Backend's own context, so that a pass never waits for one. What they need of
// the Backend is named here: its pool, whose record they keep (resource), the database of its
// own sessions (home), how it logs and says a line, and how pg_dump reaches a database as it
// does.
type archives struct {
	to       *archive.Archiver
	slots    chan struct{}
	ctx      context.Context
	stop     context.CancelFunc
	pool     *pgxpool.Pool
	resource string
	home     string
	log      ports.Logger // the audit trail's line of an archive made
	say      func(level slog.Level, consumer, format string, args ...any)
	source   func(db, role string) archive.Source

	mu     sync.Mutex
	counts ports.ArchiveCounts
	runs   map[string]*archiveRun // by database
	table  bool                   // the table was made, or found the provider's, by this process
	// checked is whether pg_dump's version was held against the server's at the start, and
	// warned whether one older than the server was said.
	checked, warned atomic.Bool
}

// archiveRun is one dump under way, or finished and not yet taken up by a Drop.
type archiveRun struct {
	name  string
	since time.Time
	done  chan struct{}
	err   error
}

// newArchives are the archives of the Backend b, made with to, parallel at once.
func newArchives(b *Backend, to *archive.Archiver, parallel int) *archives {
	ctx, stop := context.WithCancel(context.Background())
	return &archives{to: to, slots: make(chan struct{}, max(1, parallel)), ctx: ctx, stop: stop, runs: map[string]*archiveRun{},
		pool: b.pool, resource: b.resource, home: b.home, log: b.voice.log, say: b.voice.say, source: b.dumpSource}
}

// archivedFirst answers nil where each of dbs has an archive in the record (or is gone), and
// where one has not, a *ports.DropHeld: its dump started, under way, or failed (and the next
// call starts another).
func (a *archives) archivedFirst(ctx context.Context, conn *pgxpool.Conn, as string, r record, dbs []string) error {
	for _, db := range dbs {
		var oid uint32
		err := conn.QueryRow(ctx, "SELECT oid FROM pg_catalog.pg_database WHERE datname = $1", db).Scan(&oid)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return fmt.Errorf("find database %s: %w", db, err)
		}
		name, err := a.archiveOf(ctx, conn, as, oid)
		if err != nil {
			return err
		}
		if name != "" {
			continue
		}
		if err := a.archiving(as, db, oid, r); err != nil {
			return err
		}
	}
	return nil
}

// archiveOf is the name of the recorded archive (not deleted) of the database oid of as; "" for none.
func (a *archives) archiveOf(ctx context.Context, q *pgxpool.Conn, as string, oid uint32) (string, error) {
	if there, err := archivesReadable(ctx, q); err != nil || !there {
		return "", err // no table the provider can read: nothing of its was archived on this server yet
	}
	var name *string
	err := q.QueryRow(ctx, `SELECT (SELECT name FROM `+archiveTable+` WHERE resource = $1 AND login = $2 AND database_oid = $3
	    AND deleted_at IS NULL ORDER BY made_at DESC LIMIT 1)`, a.resource, as, oid).Scan(&name)
	if err != nil {
		return "", fmt.Errorf("read the archives' record (%s): %w", archiveTable, err)
	}
	if name == nil {
		return "", nil
	}
	return *name, nil
}

// archiving starts the dump of db, or answers how the one started stands: nil once it is made
// and recorded, else a *ports.DropHeld.
func (a *archives) archiving(as, db string, oid uint32, r record) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	run := a.runs[db]
	if run == nil {
		now := time.Now().UTC()
		run = &archiveRun{name: fmt.Sprintf("%s-%s-%d-%s.dump", as, db, oid, now.Format("20060102T150405Z")), since: now, done: make(chan struct{})}
		a.runs[db] = run
		go a.archive(run, as, db, oid, r)
	}
	select {
	case <-run.done:
		delete(a.runs, db)
		if run.err != nil {
			return &ports.DropHeld{Failed: true, Since: run.since, Reason: "archive failed: " + run.err.Error()}
		}
		return nil
	default:
		return &ports.DropHeld{Since: run.since, Reason: fmt.Sprintf("archiving database %s as %s first, under way since %s",
			db, a.to.Where(run.name), run.since.Format(time.RFC3339))}
	}
}

// Archived counts the archives the Backend made and failed since it started.
func (b *Backend) Archived() ports.ArchiveCounts {
	if b.archives == nil {
		return ports.ArchiveCounts{}
	}
	b.archives.mu.Lock()
	defer b.archives.mu.Unlock()
	return b.archives.counts
}

// Archives lists the archives the record keeps of this provider's consumers, newest first (at
// most maxListed).
func (b *Backend) Archives(ctx context.Context) ([]ports.Archive, error) {
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return nil, b.reach.serverError(err)
	}
	defer conn.Release()
	if there, err := archivesReadable(ctx, conn); err != nil || !there {
		return nil, err
	}
	rows, err := conn.Query(ctx, `SELECT login, database, name, place, size, sha256, made_at FROM `+archiveTable+`
	    WHERE resource = $1 AND deleted_at IS NULL ORDER BY made_at DESC LIMIT $2`, b.resource, maxListed)
	if err != nil {
		return nil, fmt.Errorf("read the archives' record: %w", err)
	}
	var out []ports.Archive
	var a ports.Archive
	_, err = pgx.ForEachRow(rows, []any{&a.As, &a.Database, &a.Name, &a.Place, &a.Size, &a.SHA256, &a.Made}, func() error {
		out = append(out, a)
		return nil
	})
	return out, err
}

// archivesReadable is whether the archives' table exists and the provider may read it: one it
// may not (another provider's, a superuser's beside a delegated one) holds none of its archives.
// Asked by oid, so that no name is resolved where the provider may not look.
func archivesReadable(ctx context.Context, q *pgxpool.Conn) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, `SELECT coalesce((SELECT pg_catalog.has_schema_privilege(n.oid, 'USAGE') AND pg_catalog.has_table_privilege(c.oid, 'SELECT')
	    FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	    WHERE n.nspname = $1 AND c.relname = 'archives'), false)`, archiveSchema).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("read the archives' record (%s): %w", archiveTable, err)
	}
	return ok, nil
}

// maxListed is the most archives Archives lists.
const maxListed = 1000

// archive takes one dump, in a slot, checks and records it, counts it, and closes run.done.
func (a *archives) archive(run *archiveRun, as, db string, oid uint32, r record) {
	defer close(run.done)
	var made archive.Made
	defer func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if run.err != nil {
			a.counts.Failed++
			return
		}
		a.counts.Made++
		a.counts.Bytes += made.Size
		a.counts.Seconds += made.Took.Seconds()
	}()
	select {
	case a.slots <- struct{}{}:
		defer func() { <-a.slots }()
	case <-a.ctx.Done():
		run.err = a.ctx.Err()
		return
	}
	server, err := a.serverMajor(a.ctx)
	if err == nil {
		err = a.dumpable(a.ctx, server)
	}
	if run.err = err; err != nil {
		return
	}
	made, err = a.to.Archive(a.ctx, a.source(db, as), run.name)
	if err != nil {
		run.err = err
		return
	}
	if run.err = a.recordArchive(a.ctx, as, db, oid, made, r); run.err != nil {
		return
	}
	if a.log != nil { // the audit trail's, as the domain's created and dropped are
		a.log.Log(ports.Entry{Level: slog.LevelInfo, Consumer: as, Event: "archived", Message: fmt.Sprintf(
			"%s: archived %s (%s) as %s (sha256 %s) before its drop, in %s", as, db, bytesText(made.Size),
			a.to.Where(made.Name), made.SHA256, made.Took.Round(time.Millisecond))})
	}
	if gone, err := a.to.Sweep(time.Now()); err != nil {
		a.say(slog.LevelWarn, "", "archives older than --archive-keep: %v", err)
	} else if len(gone) > 0 {
		a.markDeleted(a.ctx, gone)
	}
}

// dumpable refuses a pg_dump older than the server (of major server), which cannot dump it;
// said once as well.
func (a *archives) dumpable(ctx context.Context, server int) error {
	major, line, err := a.to.DumpMajor(ctx)
	switch {
	case err != nil:
		return err
	case major < server:
		err = fmt.Errorf("%s is older than the server (%d): it cannot dump it; give --pg-dump a pg_dump of %d or later", line, server, server)
	case archive.Unsafe(line):
		err = fmt.Errorf("%s lacks the fix of CVE-2024-7348 (a consumer could run SQL in its session during the dump); give --pg-dump "+
			"the latest release of its series (14.13, 15.8, 16.4 or later)", line)
	default:
		return nil
	}
	if !a.warned.Swap(true) {
		a.say(slog.LevelWarn, "", "no drop can be archived: %v", err)
	}
	return err
}

// serverMajor is the server's major version, as the pool's sessions find it.
func (a *archives) serverMajor(ctx context.Context) (int, error) {
	var n int
	if err := a.pool.QueryRow(ctx, "SELECT pg_catalog.current_setting('server_version_num')::int / 10000").Scan(&n); err != nil {
		return 0, fmt.Errorf("read the server's version: %w", err)
	}
	return n, nil
}

// recordArchive writes made into the archives' record, making its table where it is missing.
func (a *archives) recordArchive(ctx context.Context, as, db string, oid uint32, made archive.Made, r record) error {
	doc, err := json.Marshal(r)
	if err != nil {
		return err
	}
	conn, err := a.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("record archive %s: %w", made.Name, err)
	}
	defer conn.Release()
	if err := a.archiveTableReady(ctx, conn); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, `INSERT INTO `+archiveTable+` (name, resource, login, database, database_oid, place, size, sha256,
	    server_version, made_at, record) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, pg_catalog.current_setting('server_version'), $9, $10)`,
		made.Name, a.resource, as, db, oid, a.to.Where(made.Name), made.Size, made.SHA256, time.Now().UTC(), string(doc))
	if err != nil {
		return fmt.Errorf("record archive %s in %s: %w", made.Name, archiveTable, err)
	}
	return nil
}

// archiveTableReady makes the archives' schema and table where they are missing, and refuses
// them where they are somebody else's: what the provider reads back from them decides a drop.
func (a *archives) archiveTableReady(ctx context.Context, conn *pgxpool.Conn) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.table {
		return nil
	}
	for _, stmt := range []string{"CREATE SCHEMA IF NOT EXISTS " + archiveSchema, sqlArchiveTable} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("make %s in %s for the archives' record: %w", archiveTable, a.home, err)
		}
	}
	var owner string
	err := conn.QueryRow(ctx, `SELECT r.rolname FROM pg_catalog.pg_namespace n JOIN pg_catalog.pg_roles r ON r.oid = n.nspowner
	    WHERE n.nspname = $1 AND NOT (r.rolname = current_user OR r.rolsuper)
	  UNION ALL
	  SELECT r.rolname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_roles r ON r.oid = c.relowner
	    WHERE c.oid = pg_catalog.to_regclass($2) AND NOT (r.rolname = current_user OR r.rolsuper)
	  LIMIT 1`, archiveSchema, archiveTable).Scan(&owner)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		a.table = true
		return nil
	case err != nil:
		return fmt.Errorf("check the owner of %s: %w", archiveTable, err)
	}
	return refused(fmt.Errorf("%s in %s is owned by %s, not the provider: the archives are not recorded there; drop it, or give it to the provider",
		archiveTable, a.home, owner))
}

// markDeleted notes in the record that the archives named were deleted (--archive-keep).
func (a *archives) markDeleted(ctx context.Context, names []string) {
	if _, err := a.pool.Exec(ctx, `UPDATE `+archiveTable+` SET deleted_at = pg_catalog.now() WHERE name = ANY($1) AND deleted_at IS NULL`,
		names); err != nil {
		a.say(slog.LevelWarn, "", "note the archives deleted (--archive-keep) in %s: %v", archiveTable, err)
	}
}

// dumpSource is how pg_dump and pg_restore reach db, as the provider, acting as role: the host
// the Backend's sessions reach, in libpq's variables (never on a command line, which ps shows).
func (b *Backend) dumpSource(db, role string) archive.Source {
	cc := b.conns.config(db)
	env := []string{"PGHOST=" + cc.Host, "PGPORT=" + strconv.Itoa(int(cc.Port)), "PGUSER=" + cc.User, "PGDATABASE=" + db,
		"PGAPPNAME=" + b.conns.application(), "PGCONNECT_TIMEOUT=10", "PGSSLMODE=" + sslMode(cc)}
	if cc.Password != "" {
		env = append(env, "PGPASSWORD="+cc.Password)
	}
	for _, k := range []string{"PGSSLROOTCERT", "PGSSLCERT", "PGSSLKEY", "PGSSLCRL", "PGPASSFILE"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return archive.Source{Env: env, Role: role}
}

// sslMode is libpq's sslmode for what pgx made of the URL's.
func sslMode(cc *pgx.ConnConfig) string {
	switch {
	case cc.TLSConfig == nil:
		return "disable"
	case len(cc.Fallbacks) > 0 && cc.Fallbacks[len(cc.Fallbacks)-1].TLSConfig == nil:
		return "prefer"
	case cc.TLSConfig.InsecureSkipVerify:
		return "require"
	}
	return "verify-full"
}

// bytesText is n bytes as a line says it: 1.2 GB, 340 kB, 12 B.
func bytesText(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}
