package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
