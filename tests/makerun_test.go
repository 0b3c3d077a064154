package tests

import (
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

// TestMakeRunShowsLettaProvisioned runs what `make run` runs, in a folder of its own: letta
// provisioned and connectable with the line it prints, and after Ctrl-C nothing left running.
func TestMakeRunShowsLettaProvisioned(t *testing.T) {
	is := is.New(t)
	if !pgserver.Available() {
		t.Skip("make run starts its own server, and this machine has no server binaries")
	}
	dir := serverDir(t)
	is.NoErr(os.Mkdir(filepath.Join(dir, "bin"), 0o755))
	is.NoErr(os.Symlink(binary, filepath.Join(dir, "bin", "provisioner")))
	runner := filepath.Join(dir, "bin", "run")
	if out, err := exec.Command("go", "build", "-o", runner, "./run").CombinedOutput(); err != nil {
		t.Fatalf("build the runner: %v: %s", err, out)
	}

	var said buffer
	cmd := exec.Command(runner)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &said, &said
	is.NoErr(cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("make run said:\n%s", said.String())
		}
	})

	eventually(t, "letta provisioned", func() bool {
		return regexp.MustCompile(`letta is provisioned: .*dblink, pg_trgm, plpgsql, vector`).MatchString(said.String())
	})
	m := regexp.MustCompile(`PGPASSWORD="\$\(cat (\S+)\)" psql -h 127.0.0.1 -p (\d+) -U letta letta`).FindStringSubmatch(said.String())
	is.True(m != nil) // the one line to connect with psql
	secret, err := os.ReadFile(m[1])
	is.NoErr(err)
	password := string(secret[:len(secret)-1])
	url := "postgres://postgres:x@127.0.0.1:" + m[2] + "/postgres?sslmode=disable"
	is.NoErr(login(t, url, "letta", password, "letta")) // what the line says works

	is.NoErr(cmd.Process.Signal(syscall.SIGINT)) // Ctrl-C
	select {
	case err := <-exited:
		is.NoErr(err) // a clean end
	case <-time.After(60 * time.Second):
		t.Fatal("make run did not stop on Ctrl-C")
	}
	is.True(login(t, url, "letta", password, "letta") != nil) // the server is gone
	_, err = os.Stat(filepath.Join(dir, ".run"))
	is.True(os.IsNotExist(err)) // and .run/ with it
}
