package postgres_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/adapters/postgres/archive"
	"github.com/novox/postgres-provider/ports"
	"github.com/novox/postgres-provider/tests/pgserver"
)

// pgDumpFor is a pg_dump that can dump the env's server; the test skips, saying why, where this
// machine has none as new as the server.
func (e *env) pgDumpFor() string {
	e.t.Helper()
	server := e.serverMajor()
	p, places := pgserver.PgDump(e.srv.Local, server)
	if p == "" {
		e.t.Skipf("no pg_dump of %d or later on this machine (looked at %v): the archive of a drop is tested where there is one", server, places)
	}
	return p
}

// serverMajor is the env's server's major version.
func (e *env) serverMajor() int {
	e.t.Helper()
	var n int
	is.New(e.t).NoErr(e.admin("").QueryRow(ctx, "SELECT current_setting('server_version_num')::int / 10000").Scan(&n))
	return n
}

// olderPgDump is PATH's pg_dump and its version line where it is older than the env's server,
// else "".
func (e *env) olderPgDump() (string, string) {
	e.t.Helper()
	p, err := exec.LookPath("pg_dump")
	if err != nil {
		return "", ""
	}
	if n, line := pgserver.DumpMajor(p); n > 0 && n < e.serverMajor() {
		return p, line
	}
	return "", ""
}

// dropArchived drops as with b, calling Drop again while it is held for its archive, until it
// is done or fails otherwise, within a deadline; it answers what the last Drop answered.
func dropArchived(t *testing.T, b *postgres.Backend, as string) (held []*ports.DropHeld, err error) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err = b.Drop(ctx, as)
		var h *ports.DropHeld
		if !errors.As(err, &h) || h.Failed || time.Now().After(deadline) {
			return held, err
		}
		held = append(held, h)
		time.Sleep(50 * time.Millisecond) // polling the archive's end, with a deadline
	}
}

func TestADropIsArchivedFirstAndRestoredWhole(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	dir := t.TempDir()
	to, err := archive.New(archive.Config{Dir: dir, PgDump: e.pgDumpFor()})
	is.NoErr(err) // archiver
	b := e.backendWith(postgres.Config{URL: e.srv.URL, Archive: to})
	as := name("arch")
	p := withSettings(provision(as, "pg_trgm"), map[string]any{"work_mem": "8MB"})
	p.Values = map[string]any{"name": as, "extensions": []any{"pg_trgm"}}
	if !e.available("pg_trgm") {
		p.Values = map[string]any{"name": as}
	}
	if err := errOf(b.Create(ctx, p)); err != nil {
		t.Fatalf("create: %v", err)
	}
	c := e.mustLogin(as, p.Password, as)
	_, err = c.Exec(ctx, `CREATE TABLE rows AS SELECT g AS n, 'word ' || g AS w FROM generate_series(1, 100000) g`)
	is.NoErr(err) // a 100,000-row table
	var lo uint32
	is.NoErr(c.QueryRow(ctx, `SELECT lo_from_bytea(0, 'a large object')`).Scan(&lo)) // a large object
	c.Close(ctx)

	is.NoErr(b.Remove(ctx, as))
	held, err := dropArchived(t, b, as)
	is.NoErr(err)           // dropped once archived
	is.True(len(held) >= 1) // the first Drop only started the archive
	is.True(strings.Contains(held[0].Reason, "archiving database "+as))
	var dbs int
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", as).Scan(&dbs))
	is.Equal(dbs, 0) // dropped

	var file, sum string
	var size int64
	is.NoErr(e.admin("").QueryRow(ctx, `SELECT name, sha256, size FROM novox_provisioner.archives WHERE login = $1`, as).Scan(&file, &sum, &size))
	got, err := os.ReadFile(filepath.Join(dir, file))
	is.NoErr(err) // the archive is in the folder
	is.Equal(int64(len(got)), size)
	is.Equal(sha(got), sum) // the record's checksum is the file's
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".*")); len(leftovers) > 0 {
		t.Fatalf("partial files left: %v", leftovers)
	}

	// A copy that was changed is not an archive the record knows; nor is the file itself once changed.
	bad := filepath.Join(t.TempDir(), file)
	is.NoErr(os.WriteFile(bad, append([]byte{got[0] ^ 1}, got[1:]...), 0o600))
	_, err = b.Restore(ctx, as, bad)
	is.True(err != nil && strings.Contains(err.Error(), "is not an archive of "+as))
	is.NoErr(os.WriteFile(filepath.Join(dir, file), append([]byte{got[0] ^ 1}, got[1:]...), 0o600))
	_, err = b.Restore(ctx, as, "")
	is.True(err != nil && strings.Contains(err.Error(), "SHA-256")) // tampered with: refused
	is.NoErr(os.WriteFile(filepath.Join(dir, file), got, 0o600))

	said, err := b.Restore(ctx, as, "")
	is.NoErr(err) // restored
	is.True(strings.Contains(said, "restored database "+as))
	var n int
	var data []byte
	db := e.admin(as)
	is.NoErr(db.QueryRow(ctx, "SELECT count(*) FROM rows").Scan(&n))
	is.Equal(n, 100000) // every row
	is.NoErr(db.QueryRow(ctx, "SELECT lo_get($1)", lo).Scan(&data))
	is.Equal(string(data), "a large object") // the large object
	var owner string
	is.NoErr(db.QueryRow(ctx, "SELECT tableowner FROM pg_tables WHERE tablename = 'rows'").Scan(&owner))
	is.Equal(owner, as) // owned as before
	if e.available("pg_trgm") {
		var schema string
		is.NoErr(db.QueryRow(ctx, "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'pg_trgm'").Scan(&schema))
		is.Equal(schema, "extensions") // made as the provider makes it, out of the consumer's reach
	}
	is.True(slices.Contains(e.setconfig(as, as), "work_mem=8MB")) // its setting
	var login bool
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT rolcanlogin FROM pg_roles WHERE rolname = $1", as).Scan(&login))
	is.True(!login) // withdrawn until the mesh lists it again

	_, err = b.Restore(ctx, as, "")
	is.True(err != nil && strings.Contains(err.Error(), "database "+as+" exists")) // never over what exists
	is.True(errors.Is(err, ports.ErrRefused))

	// Listed again, the provider takes it up as any withdrawn consumer: the data is there.
	if err := errOf(b.Create(ctx, p)); err != nil {
		t.Fatalf("create again: %v", err)
	}
	c = e.mustLogin(as, p.Password, as)
	is.NoErr(c.QueryRow(ctx, "SELECT count(*) FROM rows").Scan(&n))
	is.Equal(n, 100000)
}

func TestAFailingArchiveCommandHoldsTheDropThenAWorkingOneArchives(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	pgDump := e.pgDumpFor()
	failing, err := archive.New(archive.Config{Command: "cat >/dev/null; echo the store is full >&2; exit 3", PgDump: pgDump})
	is.NoErr(err)
	b := e.backendWith(postgres.Config{URL: e.srv.URL, Archive: failing})
	as := name("archcmd")
	e.b = b
	e.mustCreate(provision(as))
	_, err = dropArchived(t, b, as)
	var h *ports.DropHeld
	is.True(errors.As(err, &h) && h.Failed) // held, failed
	is.True(strings.Contains(h.Reason, "archive failed: ") && strings.Contains(h.Reason, "the store is full"))
	var dbs int
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", as).Scan(&dbs))
	is.Equal(dbs, 1) // nothing dropped

	dir := t.TempDir()
	working, err := archive.New(archive.Config{Command: "cat > " + dir + "/%f", PgDump: pgDump})
	is.NoErr(err)
	b2 := e.backendWith(postgres.Config{URL: e.srv.URL, Archive: working})
	_, err = dropArchived(t, b2, as)
	is.NoErr(err) // archived, then dropped
	var file string
	is.NoErr(e.admin("").QueryRow(ctx, `SELECT name FROM novox_provisioner.archives WHERE login = $1`, as).Scan(&file))
	_, err = os.Stat(filepath.Join(dir, file))
	is.NoErr(err) // the command stored it
}

func TestAPgDumpOlderThanTheServerIsSaidAtTheStartAndHoldsEveryDrop(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	bin := t.TempDir()
	for name, script := range map[string]string{
		"pg_dump":    "#!/bin/sh\n[ \"$1\" = --version ] && echo 'pg_dump (PostgreSQL) 9.6.24' && exit 0\nexit 1\n",
		"pg_restore": "#!/bin/sh\nexit 0\n",
	} {
		is.NoErr(os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755))
	}
	pgDump, version := filepath.Join(bin, "pg_dump"), "pg_dump (PostgreSQL) 9.6.24"
	if real, line := e.olderPgDump(); real != "" {
		pgDump, version = real, line // a real one, where the server is newer than PATH's (16 to 18 here)
	}
	to, err := archive.New(archive.Config{Dir: t.TempDir(), PgDump: pgDump})
	is.NoErr(err)
	b := e.backendWith(postgres.Config{URL: e.srv.URL, Archive: to})
	_, err = b.Managed(ctx) // the start's check of the server
	is.NoErr(err)
	said := strings.Join(e.log.said(), "\n")
	is.True(strings.Contains(said, "no drop can be archived: "+version+" is older than the server")) // said at the start
	e.b = b
	first, second := name("olddump"), name("olddump")
	e.mustCreate(provision(first))
	e.mustCreate(provision(second))
	for _, as := range []string{first, second} {
		_, err := dropArchived(t, b, as)
		var h *ports.DropHeld
		is.True(errors.As(err, &h) && h.Failed)
		if !strings.Contains(h.Reason, "is older than the server") {
			t.Fatalf("held for %q, not pg_dump's version", h.Reason)
		}
	}
	n := 0
	for _, line := range e.log.said() {
		if strings.Contains(line, "no drop can be archived") {
			n++
		}
	}
	is.Equal(n, 1) // said once for all
}

// sha is the hex SHA-256 of data.
func sha(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// In delegated mode the provider dumps and restores as the member of the consumer's role it
// is; the archives' record lives in a provider database it owns. The database is named by the
// consumer's values, not after its login, and comes back by that name.
func TestADelegatedProviderArchivesAndRestores(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	pgDump := e.pgDumpFor()
	_, prov := e.delegated()
	home := name("provdb")
	e.exec("", "CREATE DATABASE "+home+" OWNER "+prov)
	t.Cleanup(func() { e.exec("", "DROP DATABASE IF EXISTS "+home+" WITH (FORCE)") })
	dir := t.TempDir()
	to, err := archive.New(archive.Config{Dir: dir, PgDump: pgDump})
	is.NoErr(err)
	b := e.backendWith(postgres.Config{URL: e.urlAs(prov, "prov-pw"), Database: home, Archive: to})
	_, err = b.Managed(ctx)
	is.NoErr(err)
	is.Equal(b.Mode(), postgres.ModeDelegated)
	as := name("darch")
	p := provision(as, "pg_trgm")
	db := as + "_db"
	p.Values["name"] = db // a database named otherwise than its login, by the consumer's values
	if err := errOf(b.Create(ctx, p)); err != nil {
		t.Fatalf("create: %v", err)
	}
	c := e.mustLogin(as, p.Password, db)
	_, err = c.Exec(ctx, `CREATE TABLE rows AS SELECT g AS n FROM generate_series(1, 1000) g`)
	is.NoErr(err)
	c.Close(ctx)

	is.NoErr(b.Remove(ctx, as))
	_, err = dropArchived(t, b, as)
	is.NoErr(err) // archived, then dropped
	said, err := b.Restore(ctx, as, "")
	is.NoErr(err)
	is.True(strings.Contains(said, "restored database "+db))
	var n int
	is.NoErr(e.admin(db).QueryRow(ctx, "SELECT count(*) FROM rows").Scan(&n))
	is.Equal(n, 1000)
	var owner, schema string
	is.NoErr(e.admin(db).QueryRow(ctx, "SELECT tableowner FROM pg_tables WHERE tablename = 'rows'").Scan(&owner))
	is.Equal(owner, as)
	is.NoErr(e.admin(db).QueryRow(ctx, "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'pg_trgm'").Scan(&schema))
	is.Equal(schema, "extensions")
}

// A replica that takes over after another archived a consumer, and before it dropped it, drops
// without dumping again: the record says the archive is made.
func TestATakeOverAfterAnArchiveDoesNotDumpAgain(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	to, err := archive.New(archive.Config{Dir: t.TempDir(), PgDump: e.pgDumpFor()})
	is.NoErr(err)
	first := e.backendWith(postgres.Config{URL: e.srv.URL, Archive: to})
	e.b = first
	as := name("takeover")
	e.mustCreate(provision(as))
	var h *ports.DropHeld
	is.True(errors.As(first.Drop(ctx, as), &h) && !h.Failed) // its archive started
	deadline := time.Now().Add(time.Minute)
	for n := 0; n == 0; time.Sleep(20 * time.Millisecond) { // polling the record, with a deadline
		_ = e.admin("").QueryRow(ctx, "SELECT count(*) FROM novox_provisioner.archives WHERE login = $1", as).Scan(&n)
		if time.Now().After(deadline) {
			t.Fatal("no archive recorded within a minute")
		}
	}
	first.Close() // the leader dies before its drop

	bin := t.TempDir()
	for file, script := range map[string]string{
		"pg_dump":    "#!/bin/sh\n[ \"$1\" = --version ] && echo 'pg_dump (PostgreSQL) 99.0' && exit 0\ntouch \"$(dirname \"$0\")/dumped\"; exit 1\n",
		"pg_restore": "#!/bin/sh\nexit 0\n",
	} {
		is.NoErr(os.WriteFile(filepath.Join(bin, file), []byte(script), 0o755))
	}
	never, err := archive.New(archive.Config{Dir: t.TempDir(), PgDump: filepath.Join(bin, "pg_dump")})
	is.NoErr(err)
	next := e.backendWith(postgres.Config{URL: e.srv.URL, Archive: never})
	is.NoErr(next.Drop(ctx, as)) // dropped at once
	_, err = os.Stat(filepath.Join(bin, "dumped"))
	is.True(os.IsNotExist(err)) // without a dump
}

// The dump runs with the consumer's rights, never the provider's: what the consumer's role
// cannot read (an operator's table in its database) holds the drop with pg_dump's own words.
func TestTheDumpRunsAsTheConsumerAndWhatItCannotReadHoldsTheDrop(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	to, err := archive.New(archive.Config{Dir: t.TempDir(), PgDump: e.pgDumpFor()})
	is.NoErr(err)
	b := e.backendWith(postgres.Config{URL: e.srv.URL, Archive: to})
	e.b = b
	as := name("unreadable")
	e.mustCreate(provision(as))
	e.exec(as, "CREATE TABLE public.operators_only (x int)", "REVOKE ALL ON public.operators_only FROM PUBLIC")
	_, err = dropArchived(t, b, as)
	var h *ports.DropHeld
	is.True(errors.As(err, &h) && h.Failed)
	if !strings.Contains(h.Reason, "permission denied for table operators_only") {
		t.Fatalf("held for %q, not the table the consumer cannot read", h.Reason)
	}
	var dbs int
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", as).Scan(&dbs))
	is.Equal(dbs, 1) // nothing dropped
	e.exec(as, "DROP TABLE public.operators_only")
	_, err = dropArchived(t, b, as)
	is.NoErr(err) // once readable, archived and dropped
}

// Archives older than --archive-keep leave the folder after the next archive, and their record
// says so: a restore then says there is none.
func TestArchivesPastTheirKeepAreDeletedAndTheRecordSaysSo(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	dir := t.TempDir()
	to, err := archive.New(archive.Config{Dir: dir, PgDump: e.pgDumpFor(), Keep: 30 * 24 * time.Hour})
	is.NoErr(err)
	b := e.backendWith(postgres.Config{URL: e.srv.URL, Archive: to})
	e.b = b
	old, next := name("kept"), name("kept")
	e.mustCreate(provision(old))
	e.mustCreate(provision(next))
	_, err = dropArchived(t, b, old)
	is.NoErr(err)
	files, _ := filepath.Glob(filepath.Join(dir, old+"-*.dump"))
	is.Equal(len(files), 1)
	month := time.Now().Add(-31 * 24 * time.Hour)
	is.NoErr(os.Chtimes(files[0], month, month)) // made a month ago
	_, err = dropArchived(t, b, next)
	is.NoErr(err)
	_, err = os.Stat(files[0])
	is.True(os.IsNotExist(err)) // swept
	var deleted bool
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT deleted_at IS NOT NULL FROM novox_provisioner.archives WHERE login = $1", old).Scan(&deleted))
	is.True(deleted) // and the record says so
	_, err = b.Restore(ctx, old, "")
	is.True(err != nil && strings.Contains(err.Error(), "no archive of "+old+" is recorded"))
	kept, err := b.Archives(ctx)
	is.NoErr(err)
	is.True(len(kept) >= 1)
	for _, a := range kept {
		is.True(a.As != old) // the list keeps only what is there
	}
}
