// Package pgserver starts a throwaway PostgreSQL server for tests and for `make run`: initdb
// into a folder of its own, listening on 127.0.0.1 only at a free port, fsync off, run as the
// postgres OS user when this process is root (the server refuses root). Binaries come from the
// folder EnvBin names (make test PG=<major> names the pinned ones), else PATH or
// /usr/lib/postgresql/*/bin.
//
// Nothing it starts outlives the process that started it: every child leads a process group of
// its own and is stopped with it (Group), the kernel stops it when its parent dies, and the
// next Start stops a server whose owner died anyway (see owner.go).
package pgserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is one running throwaway PostgreSQL.
type Server struct {
	// URL is the superuser's connection, with its password, on 127.0.0.1.
	URL string
	// Port is the server's TCP port on 127.0.0.1.
	Port int
	// Dir holds the data folder and the server's log.
	Dir string
	// LogPath is the file the server writes its log to.
	LogPath string
	// Bin is the folder of the server's binaries.
	Bin string

	group *Group
	owned bool // Dir was made here and goes with Stop
}

// Options tune Start.
type Options struct {
	// Dir is where the data folder goes; empty: a new folder from NewDir, removed by Stop. A
	// server a dead process left running in Dir is stopped first; one of a live process is
	// not, and Start fails.
	Dir string
	// Settings are extra server settings (-c name=value).
	Settings map[string]string
	// Port is the port to listen on; 0 picks a free one.
	Port int
}

// Start initialises and starts a server, and waits until it takes connections.
func Start(opts Options) (*Server, error) {
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	s, run, err := newServer(bin, opts)
	if err != nil {
		return nil, err
	}
	password, err := randomHex(16)
	if err != nil {
		return nil, s.fail(err)
	}
	data := filepath.Join(s.Dir, "data")
	if !exists(filepath.Join(data, "PG_VERSION")) {
		if err := s.initdb(run, data, password); err != nil {
			return nil, s.fail(err)
		}
	} else if password, err = s.storedPassword(); err != nil {
		return nil, s.fail(err)
	}
	if err := s.launch(run, data, password, opts); err != nil {
		return nil, err
	}
	return s, nil
}

// newServer is a server of bin's, not started, in the folder opts names (taken over) or a new
// one of its own, and the OS user it runs as (nil: this process's), who owns the folder.
func newServer(bin string, opts Options) (*Server, *syscall.Credential, error) {
	s := &Server{Bin: bin, Dir: opts.Dir}
	if s.Dir == "" {
		dir, err := NewDir()
		if err != nil {
			return nil, nil, err
		}
		s.Dir, s.owned = dir, true
	} else if err := s.takeOver(); err != nil {
		return nil, nil, err
	}
	run, err := runAs()
	if err != nil {
		return nil, nil, s.fail(err)
	}
	if err := own(s.Dir, run); err != nil {
		return nil, nil, s.fail(err)
	}
	return s, run, nil
}

// launch starts the server on data, on the port opts names or a free one, and waits until it
// takes connections; where it cannot, what Start made goes.
func (s *Server) launch(run *syscall.Credential, data, password string, opts Options) error {
	for attempt := 0; ; attempt++ {
		err := s.start(run, data, password, opts)
		if err == nil {
			return nil
		}
		if attempt == 2 || opts.Port != 0 { // a port taken between choosing and binding it is tried again
			return s.fail(err)
		}
	}
}

// takeOver makes Dir this process's: a server a dead owner left running there is stopped, and
// Dir records this process as its owner before any server starts in it.
func (s *Server) takeOver() error {
	sweepOnce()
	dir, err := filepath.Abs(s.Dir)
	if err != nil {
		return err
	}
	s.Dir = dir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := StopOrphan(dir); err != nil {
		return err
	}
	return writeOwner(dir)
}

func (s *Server) initdb(run *syscall.Credential, data, password string) error {
	pwfile, err := s.storePassword(password, run)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(s.Bin, "initdb"), "-D", data, "-U", "postgres", "--pwfile", pwfile,
		"--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: run}
	_, err = RunGroup(cmd, 5*time.Minute)
	return err
}

// storePassword writes the superuser password for initdb, and for a later Start on the same
// folder to read back, as run's; it answers the file's path.
func (s *Server) storePassword(password string, run *syscall.Credential) (string, error) {
	pwfile := filepath.Join(s.Dir, "superuser.password")
	return pwfile, writeAs(pwfile, []byte(password+"\n"), run)
}

// storedPassword reads the superuser password of a data folder made by an earlier Start.
func (s *Server) storedPassword() (string, error) {
	raw, err := os.ReadFile(filepath.Join(s.Dir, "superuser.password"))
	return strings.TrimSpace(string(raw)), err
}

func (s *Server) start(run *syscall.Credential, data, password string, opts Options) error {
	port, err := opts.Port, error(nil)
	if port == 0 {
		if port, err = freePort(); err != nil {
			return err
		}
	}
	settings := opts.Settings
	s.Port = port
	s.LogPath = filepath.Join(s.Dir, "server.log")
	logFile, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	args := []string{"-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200", "-c", "logging_collector=off"}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "-c", k+"="+settings[k])
	}
	cmd := exec.Command(filepath.Join(s.Bin, "postgres"), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: run}
	// Its own process group: a Ctrl-C meant for `make run` reaches the server through Stop, in
	// order, rather than all at once. Where this process dies first, immediate shutdown: the
	// data is thrown away.
	g, err := StartGroup(cmd, syscall.SIGQUIT)
	if err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	s.group = g
	running.add(s)
	s.URL = fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/postgres?sslmode=disable", password, port)
	return s.waitReady(30 * time.Second)
}

// waitReady polls until the server takes a connection, it exits, or the deadline passes.
func (s *Server) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.URL)
		cancel()
		if err == nil {
			return conn.Close(context.Background())
		}
		select {
		case <-s.group.Exited():
			running.remove(s)
			return fmt.Errorf("postgres exited at start; its log: %s", s.tail())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stopServer(syscall.SIGINT)
			return fmt.Errorf("postgres did not take connections within %s: %w; its log: %s", limit, err, s.tail())
		}
	}
}

// Log is what the server has logged so far.
func (s *Server) Log() ([]byte, error) { return os.ReadFile(s.LogPath) }

func (s *Server) tail() string {
	raw, _ := s.Log()
	return tail(raw)
}

// Stop shuts the server down (fast mode) and removes what Start made; a Dir given in Options
// stays, and a later Start on it finds the same data.
func (s *Server) Stop() error {
	s.stopServer(syscall.SIGINT) // fast shutdown
	if s.owned {
		return os.RemoveAll(s.Dir)
	}
	return nil
}

// stopServer stops the server with sig (SIGINT: fast shutdown; SIGQUIT: immediate) and waits
// for it; a server already stopped is left alone.
func (s *Server) stopServer(sig syscall.Signal) {
	if s.group == nil {
		return
	}
	s.group.Stop(sig, 30*time.Second)
	s.group = nil
	running.remove(s)
}

// running is every server this process started and has not stopped, for StopAll.
var running = registry{servers: map[*Server]bool{}}

type registry struct {
	sync.Mutex
	servers map[*Server]bool
}

func (r *registry) add(s *Server) {
	r.Lock()
	defer r.Unlock()
	r.servers[s] = true
}

func (r *registry) remove(s *Server) {
	r.Lock()
	defer r.Unlock()
	delete(r.servers, s)
}

// StopAll stops every server this process started and has not stopped, and removes what
// Start made for them: for a process that must end before its deferred Stops run (a signal).
func StopAll() error {
	running.Lock()
	servers := make([]*Server, 0, len(running.servers))
	for s := range running.servers {
		servers = append(servers, s)
	}
	running.Unlock()
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = s.Stop() }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (s *Server) fail(err error) error {
	if s.owned {
		_ = os.RemoveAll(s.Dir)
	}
	return err
}

// Available reports whether this machine has the server binaries Start needs.
func Available() bool {
	_, err := findBin()
	return err == nil
}

// EnvBin names the folder of the server binaries (initdb, postgres) that Start uses; empty:
// PATH, else Debian's newest. `make test PG=<major>` and `make run PG=<major>` set it to the
// binaries .ci/postgres-versions pins.
const EnvBin = "PROVISIONER_TEST_PG_BIN"

// findBin is the folder holding initdb and postgres: the one EnvBin names, else PATH's, else
// the newest /usr/lib/postgresql/<version>/bin.
func findBin() (string, error) {
	if dir := os.Getenv(EnvBin); dir != "" {
		for _, name := range []string{"initdb", "postgres"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				return "", fmt.Errorf("%s=%s: no %s there: %w", EnvBin, dir, name, err)
			}
		}
		return filepath.Abs(dir)
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real // a link in PATH to the real folder, which has pg_config beside it
		}
		dir := filepath.Dir(p)
		if exists(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, dir := range dirs {
		if exists(filepath.Join(dir, "initdb")) {
			return dir, nil
		}
	}
	return "", errors.New("no PostgreSQL server binaries (initdb, postgres) in " + EnvBin + ", PATH or /usr/lib/postgresql/*/bin; " +
		"install Debian's postgresql package, or run make test PG=<major>")
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// runAs is the postgres OS user when this process is root, else nil (run as ourselves).
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and the server refuses root: %w (create a postgres user)", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func freePort() (int, error) {
	addr, err := FreeAddr()
	if err != nil {
		return 0, err
	}
	_, port, _ := net.SplitHostPort(addr)
	return strconv.Atoi(port)
}

// FreeAddr is a loopback address with a TCP port nobody listens on now, for a server or an
// HTTP listener a test or a tool starts.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
