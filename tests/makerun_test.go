package tests

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/tests/pgserver"
)

// makeRun is what `make run` runs, in a folder of its own that stands for the project's root.
type makeRun struct {
	t    *testing.T
	dir  string
	g    *pgserver.Group
	said *buffer
}

// startMakeRun starts the runner in dir, in a process group of its own, as a terminal's
// foreground job is; it is stopped with the test, and told to stop by the kernel where this
// test binary dies first.
func startMakeRun(t *testing.T, dir string) *makeRun {
	t.Helper()
	is := is.New(t)
	if !pgserver.Available() {
		t.Skip("make run starts its own server, and this machine has no server binaries")
	}
	pgserver.Shared(t) // vector is made ready here: its build, once a machine, is not counted in the waits
	provisioner := filepath.Join(dir, "bin", "provisioner")
	if _, err := os.Lstat(provisioner); err != nil {
		is.NoErr(os.MkdirAll(filepath.Dir(provisioner), 0o755))
		is.NoErr(os.Symlink(binary, provisioner)) // what make build leaves
	}
	r := &makeRun{t: t, dir: dir, said: &buffer{}}
	cmd := exec.Command(runner)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, r.said, r.said
	var err error
	r.g, err = pgserver.StartGroup(cmd, syscall.SIGTERM)
	is.NoErr(err) // start make run
	t.Cleanup(func() {
		if !r.g.Stop(syscall.SIGTERM, time.Minute) {
			t.Errorf("make run did not stop within a minute of SIGTERM; killed")
		}
		if t.Failed() {
			t.Logf("make run said:\n%s", r.said.String())
		}
	})
	return r
}

var psqlLine = regexp.MustCompile(`PGPASSWORD="\$\(cat (\S+)\)" psql -h 127.0.0.1 -p (\d+) -U letta letta`)

// letta waits for the one line to connect with psql, and answers what it says: a URL of the
// server (with no password of its own) and letta's password.
func (r *makeRun) letta() (url, password string) {
	r.t.Helper()
	var m []string
	eventually(r.t, "the line to connect with psql", func() bool {
		m = psqlLine.FindStringSubmatch(r.said.String())
		return m != nil
	})
	secret, err := os.ReadFile(m[1])
	is.New(r.t).NoErr(err) // the secret the line names
	return "postgres://postgres:x@127.0.0.1:" + m[2] + "/postgres?sslmode=disable", string(secret[:len(secret)-1])
}

// stop sends sig to the runner's group, as a terminal does to its foreground job, and checks
// that it ended cleanly and left nothing: no process, no .run/.
func (r *makeRun) stop(sig syscall.Signal) {
	r.t.Helper()
	is := is.New(r.t)
	is.NoErr(r.g.Signal(sig))
	if !r.g.Wait(time.Minute) {
		r.t.Fatalf("make run did not stop on %v", sig)
	}
	is.Equal(r.g.ExitCode(), 0)                 // a clean end
	is.Equal(processesIn(r.dir), []string(nil)) // nothing it started left running
	_, err := os.Stat(filepath.Join(r.dir, ".run"))
	is.True(os.IsNotExist(err)) // and .run/ removed
}

// lettaExtensions answers, as letta, the extensions in its database; ok when it logs in and has
// every one that make run asks for and the server has.
func lettaExtensions(url, password string) (has string, ok bool) {
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := connect(c, url, "letta", password, "letta")
	if err != nil {
		return "", false
	}
	defer conn.Close(ctx)
	var missing int
	err = conn.QueryRow(c, `SELECT (SELECT string_agg(extname, ', ' ORDER BY extname) FROM pg_extension),
		(SELECT count(*) FROM pg_available_extensions WHERE name = ANY($1) AND installed_version IS NULL)`,
		[]string{"vector", "pg_trgm", "dblink"}).Scan(&has, &missing)
	return has, err == nil && missing == 0
}

// TestMakeRunShowsLettaProvisioned runs what `make run` runs: letta provisioned, connectable
// with the line it prints, said so only once it is, and after Ctrl-C nothing left.
func TestMakeRunShowsLettaProvisioned(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	r := startMakeRun(t, serverDir(t))
	url, password := r.letta()

	var has string
	eventually(t, "letta logs in and has every extension it asks for that the server has", func() bool {
		var ok bool
		has, ok = lettaExtensions(url, password)
		return ok
	})
	if os.Geteuid() == 0 {
		is.True(regexp.MustCompile(`\bvector\b`).MatchString(has)) // root can always install one, so letta has it
	}
	said := "make run: letta is provisioned: it logs in with the minted password; its database has " + has + "\n"
	eventually(t, "make run says letta is provisioned, naming what it has", func() bool {
		return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(said)).MatchString(r.said.String())
	})
	is.NoErr(login(t, url, "letta", password, "letta")) // what the line says works
	r.cheatSheetWorks(password)

	r.stop(syscall.SIGINT)                                    // Ctrl-C
	is.True(login(t, url, "letta", password, "letta") != nil) // the server is gone
}

// TestMakeRunStopsOnEverySignal: SIGTERM (kill, make's own) and SIGHUP (the terminal closed)
// stop make run as Ctrl-C does.
func TestMakeRunStopsOnEverySignal(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			r := startMakeRun(t, serverDir(t))
			url, password := r.letta()
			eventually(t, "letta logs in: the server and the provisioner run", func() bool {
				return login(t, url, "letta", password, "letta") == nil
			})
			r.stop(sig)
		})
	}
}

// TestMakeRunKilledLeavesNothingRunning: make run killed outright cannot stop anything, and
// the kernel stops the server and the provisioner for it; the next make run in the same folder
// removes the .run/ it left.
func TestMakeRunKilledLeavesNothingRunning(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := serverDir(t)
	r := startMakeRun(t, dir)
	url, password := r.letta()
	eventually(t, "letta logs in: the server and the provisioner run", func() bool {
		return login(t, url, "letta", password, "letta") == nil
	})
	// The server and the provisioner, seen where they run. Polled: a backend the server has just
	// forked shows the server's command line until it names itself (seen once under load).
	eventually(t, "the server and the provisioner alone run there", func() bool { return len(processesIn(dir)) == 2 })

	is.NoErr(r.g.Signal(syscall.SIGKILL))
	is.True(r.g.Wait(time.Minute)) // killed
	eventually(t, "nothing make run started still runs", func() bool { return len(processesIn(dir)) == 0 })

	again := startMakeRun(t, dir)
	url, password = again.letta()
	eventually(t, "letta logs in to the next make run's server", func() bool {
		return login(t, url, "letta", password, "letta") == nil
	})
	again.stop(syscall.SIGINT)
}

// sheetCommand is a command of the cheat sheet make run prints once letta is provisioned.
var sheetCommand = regexp.MustCompile(`(?m)^  ((?:PGPASSWORD|curl|bin/provisioner|PGPASSFILE)\S* .*)$`)

// cheatSheetWorks runs each command of the cheat sheet as printed, in make run's folder, and
// checks what each answers; none of them, nor the sheet, shows letta's password.
func (r *makeRun) cheatSheetWorks(password string) {
	r.t.Helper()
	is := is.New(r.t)
	eventually(r.t, "the cheat sheet", func() bool { return strings.Contains(r.said.String(), "make run: to add a consumer") })
	said := r.said.String()
	is.True(!strings.Contains(said, password)) // no line prints letta's password
	var lines []string
	for _, m := range sheetCommand.FindAllStringSubmatch(said[strings.Index(said, "make run: try it"):], -1) {
		lines = append(lines, m[1])
	}
	is.Equal(len(lines), 4) // psql, curl, status, plan
	run := func(line, stdin string) (int, string) {
		c, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		cmd := exec.CommandContext(c, "sh", "-c", line)
		cmd.Dir, cmd.Stdin = r.dir, strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		code := 0
		if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			r.t.Fatalf("%s: %v", line, err)
		}
		return code, string(out)
	}
	for _, line := range lines {
		switch {
		case strings.HasPrefix(line, "PGPASSWORD"):
			if _, err := exec.LookPath("psql"); err != nil {
				r.t.Logf("no psql on this machine: %s not run", line)
				continue
			}
			code, out := run(line, "SELECT 'as ' || current_user;\n")
			is.Equal(code, 0)
			is.True(strings.Contains(out, "as letta")) // connected as letta
		case strings.HasPrefix(line, "curl"):
			if _, err := exec.LookPath("curl"); err != nil {
				r.t.Logf("no curl on this machine: %s not run", line)
				continue
			}
			code, out := run(line, "")
			is.Equal(code, 0)
			is.True(regexp.MustCompile(`"as":\s*"letta"`).MatchString(out)) // /status lists letta
		case strings.HasPrefix(line, "bin/provisioner status"):
			code, out := run(line, "")
			is.Equal(code, 0) // ready
			is.True(regexp.MustCompile(`(?m)^letta\s`).MatchString(out))
		default: // the plan, with the superuser's password from a file
			code, out := run(line, "")
			is.True(code == 0 || code == 3) // it planned: as asked, or incomplete where the server lacks an extension
			is.True(regexp.MustCompile(`(?m)^letta\s`).MatchString(out))
			is.True(!strings.Contains(out, "could not"))
		}
		is.True(!strings.Contains(line, password))
	}
}
