package archive

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
)

// fakes writes a pg_dump and a pg_restore into a folder of the test's: pg_dump prints its
// version (the file version beside it, else 15.18's), or does what the file mode beside it says
// (write a file's content, "fail", "sleep"), its environment and arguments written to env.txt
// and args.txt beside it; pg_restore --list reads the file or stdin, fails on data that starts
// with BAD, else prints a table of contents; a restore writes its arguments to restore-args.txt
// and copies its --use-list file to list.txt.
func fakes(t *testing.T) (dir, pgDump string) {
	t.Helper()
	dir = t.TempDir()
	scripts := map[string]string{
		"pg_dump": `#!/bin/sh
[ "$1" = --version ] && { cat "$(dirname "$0")/version" 2>/dev/null || echo 'pg_dump (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)'; exit 0; }
env > "$(dirname "$0")/env.txt"
echo "$@" > "$(dirname "$0")/args.txt"
mode=$(cat "$(dirname "$0")/mode")
case "$mode" in
fail) echo 'pg_dump: error: query failed: ERROR:  permission denied for table secret' >&2; exit 1 ;;
sleep) echo $$ > "$(dirname "$0")/pid.txt"; exec sleep 60 ;;
*) cat "$mode" ;;
esac
`,
		"pg_restore": `#!/bin/sh
here=$(dirname "$0")
if [ "$1" = --list ]; then
	if [ -n "$2" ]; then head -c 3 "$2"; else head -c 3; fi | grep -q BAD && { echo 'pg_restore: error: did not find magic string' >&2; exit 1; }
	printf '; Archive created\n;\n1; 2615 2200 SCHEMA - public pg\n2; 3079 16384 EXTENSION - secret_ext\n3; 1259 16385 TABLE public t letta\n'
	exit 0
fi
echo "$@" > "$here/restore-args.txt"
for arg; do case "$arg" in --use-list=*) cp "${arg#--use-list=}" "$here/list.txt" ;; esac; done
`,
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir, filepath.Join(dir, "pg_dump")
}

// dumping makes the fake pg_dump in bin write content.
func dumping(t *testing.T, bin, content string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dump")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	doing(t, bin, path)
}

// doing sets the fake pg_dump's mode.
func doing(t *testing.T, bin, mode string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(bin, "mode"), []byte(mode), 0o600); err != nil {
		t.Fatal(err)
	}
}

func sumOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

var ctx = context.Background()

func TestAnArchiveInTheFolderIsWholeAndChecked(t *testing.T) {
	is := is.New(t)
	bin, pgDump := fakes(t)
	dir := t.TempDir()
	a, err := New(Config{Dir: dir, PgDump: pgDump})
	is.NoErr(err)
	content := strings.Repeat("PGDMP data ", 100000)
	dumping(t, bin, content)
	made, err := a.Archive(ctx, Source{Env: []string{"PGPASSWORD=s3cret"}, Role: "letta"}, "letta.dump")
	is.NoErr(err)
	is.Equal(made.Name, "letta.dump")
	is.Equal(made.Size, int64(len(content)))
	is.Equal(made.SHA256, sumOf(content))
	got, err := os.ReadFile(filepath.Join(dir, "letta.dump"))
	is.NoErr(err)
	is.Equal(string(got), content)
	left, _ := filepath.Glob(filepath.Join(dir, ".*"))
	is.Equal(len(left), 0) // no partial file

	dumping(t, bin, "PGDMP other")
	_, err = a.Archive(ctx, Source{}, "letta.dump")
	is.True(err != nil && strings.Contains(err.Error(), "never written over"))
	got, err = os.ReadFile(filepath.Join(dir, "letta.dump"))
	is.NoErr(err)
	is.Equal(string(got), content) // the archive there is as it was
}

func TestWhatFailsLeavesNoArchiveThatLooksWhole(t *testing.T) {
	for _, tc := range []struct{ name, dump, says string }{
		{"pg_dump fails", "fail", "pg_dump exited with status 1: pg_dump: error: query failed: ERROR:  permission denied for table secret"},
		{"the check fails", "BAD archive", "pg_restore --list exited with status 1: pg_restore: error: did not find magic string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			bin, pgDump := fakes(t)
			dir := t.TempDir()
			a, err := New(Config{Dir: dir, PgDump: pgDump})
			is.NoErr(err)
			if tc.dump == "fail" {
				doing(t, bin, "fail")
			} else {
				dumping(t, bin, tc.dump)
			}
			_, err = a.Archive(ctx, Source{Env: []string{"PGPASSWORD=s3cret"}}, "x.dump")
			is.True(err != nil)
			is.Equal(err.Error(), tc.says)
			is.True(!strings.Contains(err.Error(), "s3cret")) // no password in an error
			entries, _ := os.ReadDir(dir)
			is.Equal(len(entries), 0) // neither the archive nor its partial
		})
	}
}

func TestAnArchiveCommandGetsTheStreamAndItsFailureIsTheArchives(t *testing.T) {
	is := is.New(t)
	bin, pgDump := fakes(t)
	store := t.TempDir()
	dumping(t, bin, "PGDMP stream")
	a, err := New(Config{Command: "cat > " + store + "/%f", PgDump: pgDump})
	is.NoErr(err)
	name := "odd name $(touch pwned).dump"
	made, err := a.Archive(ctx, Source{}, name)
	is.NoErr(err)
	got, err := os.ReadFile(filepath.Join(store, name))
	is.NoErr(err) // %f, quoted, names the file as it is
	is.Equal(string(got), "PGDMP stream")
	is.Equal(made.SHA256, sumOf("PGDMP stream"))
	_, err = os.Stat("pwned")
	is.True(os.IsNotExist(err)) // nothing in the name ran

	failing, err := New(Config{Command: "cat >/dev/null; echo bucket is full >&2; exit 3", PgDump: pgDump})
	is.NoErr(err)
	_, err = failing.Archive(ctx, Source{}, "y.dump")
	is.True(err != nil)
	is.Equal(err.Error(), "archive command exited with status 3: bucket is full")
}

func TestAnArchiveCommandSeesNoEndOfABadStream(t *testing.T) {
	for _, tc := range []struct{ name, dump, says string }{
		{"pg_dump fails", "fail", "pg_dump exited with status 1: pg_dump: error: query failed: ERROR:  permission denied for table secret"},
		{"the check fails", "BAD archive", "pg_restore --list exited with status 1: pg_restore: error: did not find magic string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			bin, pgDump := fakes(t)
			store := t.TempDir()
			a, err := New(Config{Command: "cat > " + store + "/%f && touch " + store + "/kept", PgDump: pgDump})
			is.NoErr(err)
			if tc.dump == "fail" {
				doing(t, bin, "fail")
			} else {
				dumping(t, bin, tc.dump)
			}
			_, err = a.Archive(ctx, Source{}, "x.dump")
			is.True(err != nil)
			is.Equal(err.Error(), tc.says)
			_, err = os.Stat(filepath.Join(store, "kept"))
			is.True(os.IsNotExist(err)) // the command was ended, not given the end of its input
		})
	}
}

func TestAnArchiveCommandThatStopsReadingFails(t *testing.T) {
	is := is.New(t)
	bin, pgDump := fakes(t)
	dumping(t, bin, "PGDMP "+strings.Repeat("x", 1<<20))
	a, err := New(Config{Command: "head -c 10 >/dev/null", PgDump: pgDump})
	is.NoErr(err)
	_, err = a.Archive(ctx, Source{}, "x.dump")
	is.True(err != nil && strings.HasPrefix(err.Error(), "archive command stopped reading the archive before its end")) // a truncated store is no archive
}

func TestAStoppedArchiveKillsPgDump(t *testing.T) {
	is := is.New(t)
	bin, pgDump := fakes(t)
	dir := t.TempDir()
	a, err := New(Config{Dir: dir, PgDump: pgDump})
	is.NoErr(err)
	doing(t, bin, "sleep")
	c, cancel := context.WithCancel(ctx)
	errs := make(chan error, 1)
	go func() { _, err := a.Archive(c, Source{}, "z.dump"); errs <- err }()
	var pid int
	for deadline := time.Now().Add(10 * time.Second); pid == 0; time.Sleep(10 * time.Millisecond) { // pg_dump started
		if time.Now().After(deadline) {
			t.Fatal("the fake pg_dump did not start")
		}
		b, _ := os.ReadFile(filepath.Join(bin, "pid.txt"))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	cancel()
	select {
	case err := <-errs:
		is.True(err != nil)
	case <-time.After(10 * time.Second):
		t.Fatal("Archive did not return after its context ended")
	}
	is.Equal(syscall.Kill(pid, 0), syscall.ESRCH) // pg_dump is gone, and was reaped
	entries, _ := os.ReadDir(dir)
	is.Equal(len(entries), 0)
}

func TestTheChildsEnvironmentIsOnlyWhatItIsGiven(t *testing.T) {
	is := is.New(t)
	bin, pgDump := fakes(t)
	a, err := New(Config{Dir: t.TempDir(), PgDump: pgDump})
	is.NoErr(err)
	t.Setenv("PGHOST", "leak.example")
	dumping(t, bin, "PGDMP")
	_, err = a.Archive(ctx, Source{Env: []string{"PGPASSWORD=s3cret", "PGHOST=127.0.0.1"}, Role: "letta"}, "e.dump")
	is.NoErr(err)
	env, _ := os.ReadFile(filepath.Join(bin, "env.txt"))
	is.True(strings.Contains(string(env), "PGPASSWORD=s3cret"))
	is.True(!strings.Contains(string(env), "leak.example")) // none of this process's PG* variables
	args, _ := os.ReadFile(filepath.Join(bin, "args.txt"))
	is.True(strings.Contains(string(args), "--role=letta"))
	is.True(!strings.Contains(string(args), "s3cret")) // never on a command line
}

func TestFetchChecksTheChecksum(t *testing.T) {
	is := is.New(t)
	_, pgDump := fakes(t)
	dir := t.TempDir()
	is.NoErr(os.WriteFile(filepath.Join(dir, "a.dump"), []byte("PGDMP a"), 0o600))
	a, err := New(Config{Dir: dir, PgDump: pgDump})
	is.NoErr(err)
	path, done, err := a.Fetch(ctx, "a.dump", sumOf("PGDMP a"))
	is.NoErr(err)
	done()
	is.Equal(path, filepath.Join(dir, "a.dump"))
	_, _, err = a.Fetch(ctx, "a.dump", sumOf("other"))
	is.True(err != nil && strings.Contains(err.Error(), "not restored (tampered with, or another file)"))

	viaCmd, err := New(Config{Command: "cat > " + dir + "/%f", RestoreCommand: "cp " + dir + "/%f %p", PgDump: pgDump})
	is.NoErr(err)
	path, done, err = viaCmd.Fetch(ctx, "a.dump", sumOf("PGDMP a"))
	is.NoErr(err)
	got, _ := os.ReadFile(path)
	is.Equal(string(got), "PGDMP a")
	done()
	_, err = os.Stat(path)
	is.True(os.IsNotExist(err)) // the fetched copy goes with done
}

func TestSweepDeletesWhatIsOlderThanKeepAndDeadPartials(t *testing.T) {
	is := is.New(t)
	_, pgDump := fakes(t)
	dir := t.TempDir()
	now := time.Now()
	for name, age := range map[string]time.Duration{"old.dump": 31 * 24 * time.Hour, "new.dump": time.Hour, ".dead.partial": 2 * 24 * time.Hour,
		".live.partial": time.Minute} {
		p := filepath.Join(dir, name)
		is.NoErr(os.WriteFile(p, []byte("x"), 0o600))
		is.NoErr(os.Chtimes(p, now.Add(-age), now.Add(-age)))
	}
	a, err := New(Config{Dir: dir, PgDump: pgDump, Keep: 30 * 24 * time.Hour})
	is.NoErr(err)
	gone, err := a.Sweep(now)
	is.NoErr(err)
	is.Equal(gone, []string{"old.dump"})
	var left []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	is.Equal(left, []string{".live.partial", "new.dump"}) // a dead process's partial goes too, a live one's stays
}

func TestNewAndDumpMajorSayWhatIsWrong(t *testing.T) {
	is := is.New(t)
	_, pgDump := fakes(t)
	file := filepath.Join(t.TempDir(), "f")
	is.NoErr(os.WriteFile(file, nil, 0o600))
	_, err := New(Config{Dir: file, PgDump: pgDump})
	is.True(err != nil && strings.Contains(err.Error(), "--archive-to "+file+": not a folder"))
	_, err = New(Config{Dir: t.TempDir(), PgDump: "/nonexistent/pg_dump"})
	is.True(err != nil && strings.Contains(err.Error(), "--pg-dump /nonexistent/pg_dump"))
	a, err := New(Config{Dir: t.TempDir(), PgDump: pgDump})
	is.NoErr(err)
	major, line, err := a.DumpMajor(ctx)
	is.NoErr(err)
	is.Equal(major, 15)
	is.True(strings.HasPrefix(line, "pg_dump (PostgreSQL) 15.18"))

	bin := filepath.Dir(pgDump)
	is.NoErr(os.WriteFile(filepath.Join(bin, "version"), []byte("pg_dump (PostgreSQL) 18beta1\n"), 0o600))
	major, line, err = a.DumpMajor(ctx)
	is.NoErr(err)
	is.Equal(major, 18)
	is.Equal(line, "pg_dump (PostgreSQL) 18beta1")
	is.NoErr(os.WriteFile(filepath.Join(bin, "version"), []byte("pg_dump, some other program\n"), 0o600))
	_, _, err = a.DumpMajor(ctx)
	is.True(err != nil && strings.Contains(err.Error(), "is not a version line"))
}

func TestRestoreKeepsTheEntriesKeepAnswersAndReachesThroughTheEnvironment(t *testing.T) {
	is := is.New(t)
	bin, pgDump := fakes(t)
	a, err := New(Config{Dir: t.TempDir(), PgDump: pgDump})
	is.NoErr(err)
	path := filepath.Join(t.TempDir(), "a.dump")
	is.NoErr(os.WriteFile(path, []byte("PGDMP a"), 0o600))
	src := Source{Env: []string{"PGPASSWORD=s3cret", "PGDATABASE=it's"}, Role: "letta"}
	toc, err := a.List(ctx, path)
	is.NoErr(err)
	err = a.Restore(ctx, src, path, toc, func(line string) bool { return !strings.Contains(line, "EXTENSION") })
	is.NoErr(err)
	list, _ := os.ReadFile(filepath.Join(bin, "list.txt"))
	is.Equal(string(list), "; Archive created\n;\n1; 2615 2200 SCHEMA - public pg\n3; 1259 16385 TABLE public t letta\n")
	args, _ := os.ReadFile(filepath.Join(bin, "restore-args.txt"))
	is.True(strings.HasPrefix(string(args), "--role=letta --no-owner --exit-on-error --single-transaction --no-password --use-list="))
	is.True(strings.HasSuffix(string(args), ` --dbname=dbname='it\'s' `+path+"\n")) // the name quoted as a connection string's
	is.True(!strings.Contains(string(args), "s3cret"))
}

func TestExpandQuotesEachValue(t *testing.T) {
	is := is.New(t)
	is.Equal(expand("cp %f %p 100%%", map[byte]string{'f': "a'b", 'p': "/t/x"}), `cp 'a'\''b' '/t/x' 100%`)
}

func TestAPgDumpWithoutTheRelationKindFixIsUnsafe(t *testing.T) {
	is := is.New(t)
	for line, unsafe := range map[string]bool{
		"pg_dump (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)": false, "pg_dump (PostgreSQL) 15.7": true, "pg_dump (PostgreSQL) 16.4": false,
		"pg_dump (PostgreSQL) 14.12": true, "pg_dump (PostgreSQL) 18beta1": false, "pg_dump (PostgreSQL) 17.0": false, "pg_dump (PostgreSQL) 9.6.24": true,
		"something else": true,
	} {
		is.Equal(Unsafe(line), unsafe) // line
	}
}
