package pgserver

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/novox/postgres-provider/tests/poll"
)

// envOwner makes the test binary an owner of a server for TestServerDiesWithItsOwner: it
// starts one, says its folder and pid, and waits to be killed.
const envOwner = "PGSERVER_TEST_OWNER"

func TestMain(m *testing.M) {
	if os.Getenv(envOwner) != "" {
		s, err := Start(Options{})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(s.Dir, s.group.Pid())
		select {}
	}
	os.Exit(Main(m))
}

// eventually polls cond until it holds or a deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Eventually(t, what, 60*time.Second, cond)
}

// started is a server of the test's own, stopped with it; the test is skipped where this
// machine has no server binaries.
func started(t *testing.T) *Server {
	t.Helper()
	if !Available() {
		t.Skip("no server binaries on this machine")
	}
	s, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func takesConnections(s *Server) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return false
	}
	return conn.Close(ctx) == nil
}

func TestServerDiesWithItsOwner(t *testing.T) {
	is := is.New(t)
	if !Available() {
		t.Skip("no server binaries on this machine")
	}
	self, err := os.Executable()
	is.NoErr(err)
	r, w, err := os.Pipe()
	is.NoErr(err)
	defer r.Close()
	cmd := exec.Command(self, "-test.run", "^$")
	cmd.Env = append(os.Environ(), envOwner+"=1")
	cmd.Stdout, cmd.Stderr = w, os.Stderr
	owner, err := StartGroup(cmd, syscall.SIGKILL)
	w.Close()
	is.NoErr(err) // the owner
	t.Cleanup(func() { owner.Stop(syscall.SIGKILL, time.Second) })

	line, err := bufio.NewReader(r).ReadString('\n')
	is.NoErr(err) // the owner says where its server is
	fields := strings.Fields(line)
	is.Equal(len(fields), 2)
	dir := fields[0]
	pid, err := strconv.Atoi(fields[1])
	is.NoErr(err)
	is.True(!exited(pid)) // the server runs
	if os.Geteuid() == 0 {
		info, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		is.NoErr(err)
		is.True(info.Sys().(*syscall.Stat_t).Uid != 0) // as the postgres OS user: the parent-death signal survived the change of credential
	}

	is.NoErr(syscall.Kill(owner.Pid(), syscall.SIGKILL)) // the owner killed: no Stop, no cleanup
	<-owner.Exited()
	eventually(t, "the server stopped by the kernel's parent-death signal", func() bool { return exited(pid) })

	is.NoErr(sweep())
	_, err = os.Stat(dir)
	is.True(os.IsNotExist(err)) // and its folder removed by the next sweep
}

func TestSweepStopsOnlyServersOfDeadOwners(t *testing.T) {
	is := is.New(t)
	if !Available() {
		t.Skip("no server binaries on this machine")
	}
	orphan, err := Start(Options{})
	is.NoErr(err)
	defer orphan.Stop()
	foreign, err := Start(Options{})
	is.NoErr(err)
	defer foreign.Stop()
	ours, err := Start(Options{})
	is.NoErr(err)
	defer ours.Stop()

	// A dead owner: a process that ran and was reaped.
	dead := exec.Command("true")
	is.NoErr(dead.Run())
	is.NoErr(os.WriteFile(orphan.Dir+"/"+ownerFile, []byte(owner{pid: dead.Process.Pid, start: "1", boot: bootID()}.String()), 0o644))
	// A live owner that is another process: the go command that runs this test binary.
	start, _ := procStat(os.Getppid())
	parent := owner{pid: os.Getppid(), start: start, boot: bootID()}
	is.True(parent.alive())
	is.NoErr(os.WriteFile(foreign.Dir+"/"+ownerFile, []byte(parent.String()), 0o644))

	is.True(StopOrphan(foreign.Dir) != nil) // refused: its owner lives
	is.NoErr(sweep())

	select {
	case <-orphan.group.Exited(): // the dead owner's server stopped
	case <-time.After(60 * time.Second):
		t.Fatal("the server of a dead owner still runs after the sweep")
	}
	_, err = os.Stat(orphan.Dir)
	is.True(os.IsNotExist(err))        // and its folder removed
	is.True(takesConnections(foreign)) // a live owner's server untouched
	is.True(takesConnections(ours))    // and so is ours
	is.NoErr(writeOwner(foreign.Dir))  // ours again, for its Stop
	_, err = os.Stat(foreign.Dir + "/data/PG_VERSION")
	is.NoErr(err) // with its data
}

func TestStopStopsTheWholeGroup(t *testing.T) {
	cases := []struct {
		name, script string
		inTime       bool
	}{
		{"the leader stops on the signal", `sleep 300 & echo $!; wait`, true},
		{"the leader ignores it", `trap "" TERM; sleep 300 & echo $!; wait`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			r, w, err := os.Pipe()
			is.NoErr(err)
			defer r.Close()
			cmd := exec.Command("sh", "-c", c.script)
			cmd.Stdout = w
			g, err := StartGroup(cmd, syscall.SIGKILL)
			w.Close()
			is.NoErr(err)
			line, err := bufio.NewReader(r).ReadString('\n')
			is.NoErr(err)
			member, err := strconv.Atoi(strings.TrimSpace(line))
			is.NoErr(err)

			is.Equal(g.Stop(syscall.SIGTERM, 500*time.Millisecond), c.inTime) // whether the leader stopped on the signal
			eventually(t, "the member stopped with its leader", func() bool { return exited(member) })
		})
	}
}

func TestVectorFallsBackToTheStandIn(t *testing.T) {
	is := is.New(t)
	dirs := Folders{Extension: t.TempDir(), Lib: t.TempDir(), PGXS: "/nonexistent/pgxs.mk", PGConfig: "/nonexistent/pg_config", Major: "15"}
	control := filepath.Join(dirs.Extension, "vector.control")

	v, err := ensureVector(dirs, "") // a fresh clone elsewhere: no third-party folder
	is.NoErr(err)
	is.True(!v.Real)                                                        // the stand-in
	is.True(strings.Contains(v.Why, "no "+pgvectorTarball+" in ../shared")) // and why
	raw, err := os.ReadFile(control)
	is.NoErr(err)
	is.True(strings.Contains(string(raw), standInMark)) // installed, told apart by its comment
	_, err = os.Stat(filepath.Join(dirs.Extension, vectorScriptName))
	is.NoErr(err) // with its script

	tampered := filepath.Join(t.TempDir(), pgvectorTarball)
	is.NoErr(os.WriteFile(tampered, []byte("not pgvector"), 0o644))
	v, err = ensureVector(dirs, tampered)
	is.NoErr(err)
	is.True(!v.Real)                            // a tarball that is not the one named is never built
	is.True(strings.Contains(v.Why, "sha256 ")) // and says so

	is.NoErr(os.WriteFile(control, []byte("comment = 'vector data type and ivfflat and hnsw access methods'\n"), 0o644))
	v, err = ensureVector(dirs, "")
	is.NoErr(err)
	is.True(v.Real) // pgvector, where it is installed
}

func TestVectorIsNotBuiltWithoutTheServerHeaders(t *testing.T) {
	is := is.New(t)
	src := pgvectorSource()
	if src == "" {
		t.Skip("no " + pgvectorTarball + " beside this checkout")
	}
	dirs := Folders{Extension: t.TempDir(), Lib: t.TempDir(), PGXS: "/nonexistent/pgxs.mk", PGConfig: "/nonexistent/pg_config", Major: "15"}
	v, err := ensureVector(dirs, src)
	is.NoErr(err)
	is.True(!v.Real)                                                     // the stand-in
	is.True(strings.Contains(v.Why, "install postgresql-server-dev-15")) // and what to install for pgvector
}

func TestStartsTheServerOfTheBinariesNamedAndFindsItsFolders(t *testing.T) {
	is := is.New(t)
	s := started(t)
	if dir := os.Getenv(EnvBin); dir != "" {
		want, err := filepath.Abs(dir)
		is.NoErr(err)
		is.Equal(s.Bin, want) // the binaries make test PG=<major> names
	}
	f, err := s.Folders()
	is.NoErr(err)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.URL)
	is.NoErr(err)
	defer conn.Close(ctx)
	var major, sharedir, pkglibdir string
	is.NoErr(conn.QueryRow(ctx, `SELECT (current_setting('server_version_num')::int / 10000)::text,
		(SELECT setting FROM pg_config WHERE name = 'SHAREDIR'), (SELECT setting FROM pg_config WHERE name = 'PKGLIBDIR')`).
		Scan(&major, &sharedir, &pkglibdir))
	is.Equal(major, f.Major) // the running server is the version its binaries say
	t.Logf("PostgreSQL %s from %s", major, s.Bin)
	// The folders found from the binaries are the ones the running server looks in.
	same := func(a, b string) bool {
		ra, err1 := filepath.EvalSymlinks(a)
		rb, err2 := filepath.EvalSymlinks(b)
		return err1 == nil && err2 == nil && ra == rb
	}
	is.True(same(f.Extension, filepath.Join(sharedir, "extension"))) // its extension folder
	is.True(same(f.Lib, pkglibdir))                                  // its library folder
}

func TestAllowListingLetsARoleThatIsNotASuperuserCreateOnlyWhatItLists(t *testing.T) {
	is := is.New(t)
	s := AllowListing(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.URL)
	is.NoErr(err)
	defer conn.Close(ctx)
	role, db := "admin_"+strconv.Itoa(os.Getpid()), "allow_"+strconv.Itoa(os.Getpid())
	for _, sql := range []string{"CREATE ROLE " + role + " LOGIN CREATEROLE CREATEDB PASSWORD 'admin-pw'", "CREATE DATABASE " + db + " OWNER " + role} {
		_, err := conn.Exec(ctx, sql)
		is.NoErr(err)
	}
	t.Cleanup(func() {
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
		_, _ = conn.Exec(ctx, "DROP ROLE IF EXISTS "+role)
	})
	cfg, err := pgx.ParseConfig(s.URL)
	is.NoErr(err)
	cfg.User, cfg.Password, cfg.Database = role, "admin-pw", db
	admin, err := pgx.ConnectConfig(ctx, cfg)
	is.NoErr(err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, "CREATE EXTENSION pg_trgm")
	is.NoErr(err) // allow-listed
	var owner string
	is.NoErr(admin.QueryRow(ctx, "SELECT pg_get_userbyid(extowner)::text FROM pg_extension WHERE extname = 'pg_trgm'").Scan(&owner))
	is.Equal(owner, "postgres") // made by the bootstrap superuser: pgextwlist, not the extension's being trusted
	_, err = admin.Exec(ctx, "CREATE EXTENSION dblink")
	is.True(err != nil && strings.Contains(err.Error(), "permission denied to create extension")) // not listed, not trusted
}

func TestAnExtensionsControlFilesAreInstalledLastAndWhole(t *testing.T) {
	is := is.New(t)
	names := []string{"x.control", "x--1.0--1.1.sql", "a.control", "x--1.0.sql"}
	sort.Slice(names, func(i, j int) bool { return controlLast(names[i], names[j]) })
	is.Equal(names, []string{"x--1.0--1.1.sql", "x--1.0.sql", "a.control", "x.control"}) // the scripts first

	dir := t.TempDir()
	written, err := place(filepath.Join(dir, "x.control"), []byte("comment = 'x'\n"), 0o644)
	is.NoErr(err)
	is.True(written)
	raw, err := os.ReadFile(filepath.Join(dir, "x.control"))
	is.NoErr(err)
	is.Equal(string(raw), "comment = 'x'\n")
	left, err := os.ReadDir(dir)
	is.NoErr(err)
	is.Equal(len(left), 1) // nothing left beside it

	written, err = place(filepath.Join(dir, "missing", "x.control"), nil, 0o644)
	is.True(!written && err != nil) // a folder that cannot be written is told apart
}

// TestSessionsCPUCountsTheSessionsNotTheBackground: a session's work is counted while it is
// live and once it has ended; the checkpointer's title is no session's, a session's is.
func TestSessionsCPUCountsTheSessionsNotTheBackground(t *testing.T) {
	is := is.New(t)
	s := started(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.URL)
	is.NoErr(err)
	var backend int
	is.NoErr(conn.QueryRow(ctx, "SELECT pg_catalog.pg_backend_pid()").Scan(&backend))
	pm, err := Postmaster(backend)
	is.NoErr(err)
	title, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", backend))
	is.NoErr(err)
	is.True(clientBackend.Match(title)) // a session's title: its host and port
	children, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pm, pm))
	is.NoErr(err)
	background := 0
	for _, c := range strings.Fields(string(children)) {
		title, _ := os.ReadFile("/proc/" + c + "/cmdline")
		if strings.Contains(string(title), "checkpointer") {
			background++
			is.True(!clientBackend.Match(title)) // the checkpointer is no session
		}
	}
	is.Equal(background, 1)

	before, err := SessionsCPU(pm)
	is.NoErr(err)
	_, err = conn.Exec(ctx, "SELECT count(*) FROM generate_series(1, 3000000) g WHERE g % 7 = 0")
	is.NoErr(err)
	live, err := SessionsCPU(pm)
	is.NoErr(err)
	is.True(live-before >= 100*time.Millisecond) // the live session's work
	is.NoErr(conn.Close(ctx))
	eventually(t, "the session's backend to end", func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", backend))
		return err != nil
	})
	ended, err := SessionsCPU(pm)
	is.NoErr(err)
	is.True(ended >= live) // its work stays counted once it has ended (the postmaster's cutime)
	all, err := CPU(pm)
	is.NoErr(err)
	is.True(ended <= all) // never more than the whole server's
}
