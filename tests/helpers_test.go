package tests

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/novox/postgres-provider/tests/pgserver"
	"github.com/novox/postgres-provider/tests/poll"
)

// binary is the provisioner built for these tests, and runner what `make run` runs.
var binary, runner string

// stopGrace is how long a provisioner may take to stop on SIGTERM: the pass under way
// finishes, bounded by its holds timeout (30 s).
const stopGrace = 45 * time.Second

func TestMain(m *testing.M) {
	// A folder the next test binary's sweep removes where this one is killed.
	dir, err := pgserver.NewDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary, runner = filepath.Join(dir, "provisioner"), filepath.Join(dir, "run")
	for _, build := range [][]string{{"-race", "-o", binary, "../cmd/provisioner"}, {"-o", runner, "./run"}} {
		if _, err := pgserver.RunGroup(exec.Command("go", append([]string{"build"}, build...)...), 10*time.Minute); err != nil {
			fmt.Fprintln(os.Stderr, "build:", err)
			_ = os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := pgserver.Main(m)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

var ctx = context.Background()

var serial atomic.Int64
var run = randomHex(3)

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func name(base string) string { return fmt.Sprintf("%s_%s_%d", base, run, serial.Add(1)) }

// buffer is an io.Writer safe to read while the process writes it.
type buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// proc is one provisioner process.
type proc struct {
	t      *testing.T
	g      *pgserver.Group
	stderr *buffer
	listen string
}

// start runs the provisioner with args and --listen on a free port, in a process group of its
// own; it is stopped with the test, and killed by the kernel where this test binary dies first.
// It returns once the provisioner holds the port (or has exited), on another port where
// another process took the first (see listen_test.go).
func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	for attempt := 1; ; attempt++ {
		p := launch(t, env, args...)
		if p.bound() || attempt == 3 {
			return p
		}
		t.Logf("%s was taken by another process before the provisioner bound it; started again on another port", p.listen)
	}
}

func launch(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return launchVia(t, env, nil, args...)
}

// launchVia is launch, the provisioner started by the command via (e.g. a shell that sets a
// limit first, then execs what follows it) where via is not empty.
func launchVia(t *testing.T, env, via []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, stderr: &buffer{}, listen: freeAddr(t)}
	argv := append(append(via, binary), append(args, "--listen", p.listen)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = p.stderr, p.stderr
	var err error
	p.g, err = pgserver.StartGroup(cmd, syscall.SIGKILL)
	is.New(t).NoErr(err) // start the provisioner
	t.Cleanup(func() {
		if !p.g.Stop(syscall.SIGTERM, stopGrace) {
			t.Errorf("the provisioner did not stop within %s of SIGTERM; killed", stopGrace)
		}
		if t.Failed() {
			t.Logf("provisioner said:\n%s", p.stderr.String())
		}
	})
	return p
}

// stop sends SIGTERM and answers the exit code.
func (p *proc) stop() int {
	p.t.Helper()
	is.New(p.t).NoErr(p.g.Signal(syscall.SIGTERM))
	if !p.g.Wait(stopGrace) {
		p.t.Fatal("the provisioner did not stop on SIGTERM")
	}
	return p.g.ExitCode()
}

// count is how many lines the provisioner said that contain part.
func (p *proc) count(part string) int { return strings.Count(p.stderr.String(), part) }

// get fetches a path of the provisioner's HTTP endpoints: status and body.
func (p *proc) get(path string) (int, string) {
	resp, err := http.Get("http://" + p.listen + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// status decodes the provisioner's /status into doc; an error names what it could not decode.
func (p *proc) status(doc any) error {
	_, body := p.get("/status")
	if err := json.Unmarshal([]byte(body), doc); err != nil {
		return fmt.Errorf("/status: %w: %s", err, body)
	}
	return nil
}

// metric is the value of a sample of /metrics, -1 where it is not there (yet). The sample is
// written without its resource label, e.g. provisioner_consumers{state="applied"}: each test's
// provisioner serves a resource of its own.
func (p *proc) metric(sample string) float64 {
	_, body := p.get("/metrics")
	name, labels, _ := strings.Cut(strings.TrimSuffix(sample, "}"), "{")
	pattern := `(?m)^` + regexp.QuoteMeta(name) + `\{resource="[^"]*"`
	if labels != "" {
		pattern += "," + regexp.QuoteMeta(labels)
	}
	m := regexp.MustCompile(pattern + `\} (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// passes waits until the provisioner has run n more passes than now.
func (p *proc) passes(n int) {
	p.t.Helper()
	const sample = `provisioner_passes_total`
	var now float64
	eventually(p.t, "the first pass", func() bool { now = p.metric(sample); return now >= 1 })
	if n == 0 {
		return
	}
	eventually(p.t, fmt.Sprintf("%d more passes", n), func() bool { return p.metric(sample) >= now+float64(n) })
}

// eventually polls cond until it holds or a deadline passes: the provisioner runs on its own.
// A bound on a wait, not a guess of how long it takes: a loaded 2-core machine shared with
// other test runs took more than 30 s to create 40 consumers.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Eventually(t, what, 2*time.Minute, cond)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := pgserver.FreeAddr()
	is.New(t).NoErr(err)
	return addr
}

// serverDir is a folder for a server of the test's own, removed with the test, or by the next
// test binary's sweep where this one is killed. Not t.TempDir, whose parent only root may
// enter: the server may run as the postgres OS user.
func serverDir(t *testing.T) string {
	t.Helper()
	dir, err := pgserver.NewDir()
	is.New(t).NoErr(err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// mesh is a contributions file and its secrets in a folder of the test's, for a resource of
// the test's own: the tests share a server, and a provider withdraws every consumer of its
// resource that its file does not list.
type mesh struct {
	t        testing.TB
	dir      string
	file     string
	resource string
}

func newMesh(t testing.TB) *mesh {
	dir := t.TempDir()
	return &mesh{t: t, dir: dir, file: filepath.Join(dir, "contributions.json"), resource: "pg-" + randomHex(4)}
}

// args are the provisioner's flags for this mesh: its file and its resource.
func (m *mesh) args(more ...string) []string {
	return append([]string{"--receives", m.file, "--resource", m.resource}, more...)
}

type consumer struct {
	as, password string
	extensions   []string
}

// consumers are n fresh consumers named after base, each with a password of its own and
// the extensions given.
func consumers(base string, n int, extensions ...string) []consumer {
	cs := make([]consumer, n)
	for i := range cs {
		cs[i] = consumer{as: name(base), password: randomHex(8), extensions: extensions}
	}
	return cs
}

func (m *mesh) secret(as string) string { return filepath.Join(m.dir, as+".postgres") }

// give replaces the contributions file, by rename as the mesh does, and writes each secret.
func (m *mesh) give(cs ...consumer) {
	m.t.Helper()
	entries := make([]map[string]any, len(cs))
	for i, c := range cs {
		exts := c.extensions
		if exts == nil {
			exts = []string{}
		}
		entries[i] = m.entry(c, exts, nil)
	}
	m.giveEntries(cs, entries...)
}

// entry is c's entry in the contributions file, its values naming extensions (each a name, or
// {"name", "version"}), with derived where that is not nil.
func (m *mesh) entry(c consumer, extensions any, derived map[string]any) map[string]any {
	e := map[string]any{"as": c.as, "secret": m.secret(c.as), "node": c.as, "at": "127.0.0.1",
		"values": map[string]any{"name": c.as, "extensions": extensions}}
	if derived != nil {
		e["derived"] = derived
	}
	return e
}

// giveEntries replaces the contributions file with entries as given, by rename as the mesh
// does, and writes the secret of each of cs.
func (m *mesh) giveEntries(cs []consumer, entries ...map[string]any) {
	m.t.Helper()
	for _, c := range cs {
		m.writeFile(m.secret(c.as), c.password+"\n")
	}
	raw, err := json.Marshal(map[string]any{"requirement": m.resource, "given": entries})
	is.New(m.t).NoErr(err)
	m.writeFile(m.file, string(raw))
}

// aged dates the contributions file a minute back: written before the provisioner that reads
// it started, and settled since.
func (m *mesh) aged() {
	m.t.Helper()
	m.agedTo(time.Now().Add(-time.Minute))
}

// agedTo dates the contributions file back to when.
func (m *mesh) agedTo(when time.Time) {
	m.t.Helper()
	is.New(m.t).NoErr(os.Chtimes(m.file, when, when))
}

// remove deletes a file of the mesh's, as a secret not written yet.
func (m *mesh) remove(path string) {
	m.t.Helper()
	is.New(m.t).NoErr(os.Remove(path))
}

func (m *mesh) writeFile(path, content string) {
	m.t.Helper()
	tmp := path + ".tmp"
	is.New(m.t).NoErr(os.WriteFile(tmp, []byte(content), 0o600))
	is.New(m.t).NoErr(os.Rename(tmp, path))
}

// logsIn is whether c can log in to its database with its password.
func (c consumer) logsIn(t testing.TB, url string) bool {
	return login(t, url, c.as, c.password, c.as) == nil
}

// connect opens a session on url's server as user, with password, to db; each "" keeps what
// url says.
func connect(c context.Context, url, user, password, db string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	if user != "" {
		cfg.User, cfg.Password = user, password
	}
	if db != "" {
		cfg.Database = db
	}
	return pgx.ConnectConfig(c, cfg)
}

// mustConnect is a session of connect's for a test that cannot go on without it, closed with
// the test.
func mustConnect(t testing.TB, url, user, password, db string) *pgx.Conn {
	t.Helper()
	conn, err := connect(ctx, url, user, password, db)
	if err != nil {
		t.Fatalf("connect as %q to %q: %v", user, db, err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx) })
	return conn
}

// login tries to connect as user to db.
func login(t testing.TB, url, user, password, db string) error {
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := connect(c, url, user, password, db)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// query runs sql in db as the superuser and scans one row into dest.
func query(t testing.TB, url, db, sql string, dest ...any) error {
	conn, err := connect(ctx, url, "", "", db)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if len(dest) == 0 {
		_, err = conn.Exec(ctx, sql)
		return err
	}
	return conn.QueryRow(ctx, sql).Scan(dest...)
}

// onceLimit is how long a provisioner run to its end may take: one pass, bounded by the holds
// timeout (30 s), and the 2 min bound of a create on a server that never answers.
const onceLimit = 3 * time.Minute

// runOnce runs the provisioner to its end, in a process group of its own, and answers its exit
// code and what it said.
func runOnce(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var out buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	g, err := pgserver.StartGroup(cmd, syscall.SIGKILL)
	if err != nil {
		t.Fatalf("run the provisioner: %v", err)
	}
	if !g.Wait(onceLimit) {
		g.Stop(syscall.SIGKILL, time.Second)
		t.Fatalf("the provisioner still ran after %s; killed. It said:\n%s", onceLimit, out.String())
	}
	return g.ExitCode(), out.String()
}

// processesIn are the processes whose command line names dir (a server's -D, a provisioner's
// --receives), as "pid command line": what a test that started them must leave none of. A
// zombie's command line is empty: it has ended.
func processesIn(dir string) []string {
	var found []string
	lines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, path := range lines {
		raw, err := os.ReadFile(path)
		if err == nil && bytes.Contains(raw, []byte(dir)) {
			found = append(found, filepath.Base(filepath.Dir(path))+" "+string(bytes.ReplaceAll(raw, []byte{0}, []byte{' '})))
		}
	}
	return found
}
