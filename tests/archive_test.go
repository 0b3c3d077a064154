package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/tests/pgserver"
)

// pgDumpFor is a pg_dump that can dump srv; the test skips, saying why, where this machine has
// none as new as it.
func pgDumpFor(t *testing.T, srv *pgserver.TestServer) string {
	t.Helper()
	var server int
	is.New(t).NoErr(query(t, srv.URL, "", "SELECT current_setting('server_version_num')::int / 10000", &server))
	p, places := pgserver.PgDump(srv.Local, server)
	if p == "" {
		t.Skipf("no pg_dump of %d or later on this machine (looked at %v): archives are tested where there is one", server, places)
	}
	return p
}

// archiveScene is where each archive test starts: the shared server's URL, a pg_dump for it, a
// folder for archives, and a mesh listing letta.
func archiveScene(t *testing.T) (url, pgDump, dir string, m *mesh, letta consumer) {
	t.Helper()
	srv := pgserver.Shared(t)
	m = newMesh(t)
	letta = consumer{as: name("letta"), password: randomHex(8)}
	m.give(letta)
	return srv.URL, pgDumpFor(t, srv), t.TempDir(), m, letta
}

// The operator's whole story: a consumer unlisted with --on-withdraw drop and --archive-to is
// archived, then dropped; `provisioner restore` brings its data back, withdrawn; listed again,
// it logs in to its data.
func TestADroppedConsumerIsArchivedAndRestoredByTheCommand(t *testing.T) {
	is := is.New(t)
	url, pgDump, dir, m, letta := archiveScene(t)
	archiving := []string{"--archive-to", dir, "--pg-dump", pgDump}
	p := start(t, nil, daemonArgs(m, url, append([]string{"--on-withdraw", "drop", "--drop-after", "0"}, archiving...)...)...)
	eventually(t, "letta logs in", func() bool { return letta.logsIn(t, url) })
	c := mustConnect(t, url, letta.as, letta.password, letta.as)
	_, err := c.Exec(ctx, "CREATE TABLE notes AS SELECT g AS n FROM generate_series(1, 5000) g")
	is.NoErr(err)
	c.Close(ctx)

	m.give()
	eventually(t, "its database archived, then dropped", func() bool {
		var left int
		err := query(t, url, "", fmt.Sprintf(`SELECT (SELECT count(*) FROM pg_roles WHERE rolname = '%[1]s')
			+ (SELECT count(*) FROM pg_database WHERE datname = '%[1]s')`, letta.as), &left)
		return err == nil && left == 0
	})
	is.Equal(p.count(letta.as+": drop held: archiving database "+letta.as), 1) // said once
	is.Equal(p.count(letta.as+": archived "+letta.as), 1)
	eventually(t, "the archive counted", func() bool {
		return p.metric("provisioner_archives_total") == 1 && p.metric("provisioner_archive_bytes_total") > 0
	})
	eventually(t, "the archive in /status", func() bool {
		var doc struct {
			Archives []struct {
				As     string `json:"as"`
				SHA256 string `json:"sha256"`
			} `json:"archives"`
		}
		return p.status(&doc) == nil && len(doc.Archives) == 1 && doc.Archives[0].As == letta.as && len(doc.Archives[0].SHA256) == 64
	})
	is.Equal(p.stop(), 0)
	files, _ := filepath.Glob(filepath.Join(dir, letta.as+"-*.dump"))
	is.Equal(len(files), 1) // the archive, whole

	code, out := runOnce(t, nil, append([]string{"restore", letta.as}, m.args(append([]string{"--database-url", url}, archiving...)...)...)...)
	is.Equal(code, 0) // restored
	is.True(strings.Contains(out, letta.as+": restored database "+letta.as))
	is.True(!strings.Contains(out, letta.password))
	var n int
	is.NoErr(query(t, url, letta.as, "SELECT count(*) FROM notes", &n))
	is.Equal(n, 5000)
	is.True(!letta.logsIn(t, url)) // withdrawn until listed again

	code, out = runOnce(t, nil, append([]string{"restore", letta.as}, m.args(append([]string{"--database-url", url}, archiving...)...)...)...)
	is.Equal(code, 1) // refused: its database exists
	is.True(strings.Contains(out, "database "+letta.as+" exists"))

	m.give(letta)
	start(t, nil, daemonArgs(m, url, archiving...)...)
	eventually(t, "letta, listed again, logs in to its data", func() bool { return letta.logsIn(t, url) })
	is.NoErr(query(t, url, letta.as, "SELECT count(*) FROM notes", &n))
	is.Equal(n, 5000)
	_ = os.Remove(files[0])
}

// stuckDump is a pg_dump that, once it writes its pid to started, hangs; pg_restore beside it is
// real's.
func stuckDump(t *testing.T, real string) (path, started string) {
	t.Helper()
	bin := t.TempDir()
	started = filepath.Join(bin, "started")
	script := fmt.Sprintf("#!/bin/sh\n[ \"$1\" = --version ] && exec %q \"$@\"\necho $$ > %q\nexec sleep 600\n", real, started)
	is.New(t).NoErr(os.WriteFile(filepath.Join(bin, "pg_dump"), []byte(script), 0o755))
	is.New(t).NoErr(os.Symlink(filepath.Join(filepath.Dir(real), "pg_restore"), filepath.Join(bin, "pg_restore")))
	return filepath.Join(bin, "pg_dump"), started
}

// kill -9 of the daemon mid-dump leaves no archive that looks whole, and drops nothing; the
// next daemon archives before it drops.
func TestAKilledDaemonLeavesNoArchiveThatLooksWholeAndTheNextArchivesFirst(t *testing.T) {
	is := is.New(t)
	url, pgDump, dir, m, letta := archiveScene(t)
	stuck, started := stuckDump(t, pgDump)
	drop := []string{"--on-withdraw", "drop", "--drop-after", "0", "--archive-to", dir}
	p := start(t, nil, daemonArgs(m, url, append(drop, "--pg-dump", stuck)...)...)
	eventually(t, "letta logs in", func() bool { return letta.logsIn(t, url) })
	m.give()
	var pid int
	eventually(t, "its dump under way", func() bool {
		raw, err := os.ReadFile(started)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(raw)))
		return err == nil && pid > 0
	})
	is.NoErr(syscall.Kill(p.g.Pid(), syscall.SIGKILL)) // the daemon alone: pg_dump is in a group of its own
	is.True(p.g.Wait(10 * time.Second))
	eventually(t, "pg_dump dies with the daemon", func() bool { return syscall.Kill(pid, 0) != nil })
	whole, _ := filepath.Glob(filepath.Join(dir, letta.as+"-*.dump"))
	is.Equal(len(whole), 0) // nothing that looks whole
	var dbs int
	is.NoErr(query(t, url, "", fmt.Sprintf("SELECT count(*) FROM pg_database WHERE datname = '%s'", letta.as), &dbs))
	is.Equal(dbs, 1) // nothing dropped

	next := start(t, nil, daemonArgs(m, url, append(drop, "--pg-dump", pgDump)...)...)
	eventually(t, "archived, then dropped", func() bool {
		var left int
		err := query(t, url, "", fmt.Sprintf("SELECT count(*) FROM pg_database WHERE datname = '%s'", letta.as), &left)
		return err == nil && left == 0
	})
	whole, _ = filepath.Glob(filepath.Join(dir, letta.as+"-*.dump"))
	is.Equal(len(whole), 1)
	is.Equal(next.count(letta.as+": archived "+letta.as), 1)
}

// A full disk (here a file-size limit on the daemon) holds the drop with one line, and drops
// nothing.
func TestAFullDiskHoldsTheDropWithOneLine(t *testing.T) {
	is := is.New(t)
	url, pgDump, dir, m, letta := archiveScene(t)
	args := daemonArgs(m, url, "--on-withdraw", "drop", "--drop-after", "0", "--archive-to", dir, "--pg-dump", pgDump)
	p := launchVia(t, nil, []string{"/bin/sh", "-c", `ulimit -f 64 && exec "$@"`, "sh"}, args...)
	eventually(t, "letta logs in", func() bool { return letta.logsIn(t, url) })
	c := mustConnect(t, url, letta.as, letta.password, letta.as)
	_, err := c.Exec(ctx, "CREATE TABLE noise AS SELECT g, md5(g::text) AS h FROM generate_series(1, 100000) g")
	is.NoErr(err)
	c.Close(ctx)
	m.give()
	eventually(t, "the drop held", func() bool { return p.count(letta.as+": drop held: archive failed: ") == 1 })
	is.True(p.count("file too large") >= 1)
	p.passes(5)
	is.Equal(p.count(letta.as+": drop held: archive failed: "), 1) // one line: the next try waits a minute
	var dbs int
	is.NoErr(query(t, url, "", fmt.Sprintf("SELECT count(*) FROM pg_database WHERE datname = '%s'", letta.as), &dbs))
	is.Equal(dbs, 1) // nothing dropped
	entries, _ := os.ReadDir(dir)
	is.Equal(len(entries), 0) // and no partial file left
}
