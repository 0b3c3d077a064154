package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
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
	"syscall"
	"time"

	"github.com/novox/postgres-provider/tests/pgserver"
)

// provApp is the application_name of the provisioner's sessions, to tell them apart on the
// server.
const provApp = "novox-provisioner-compare"

// mesh is a contributions file and its secrets, for one resource: each workload has its own,
// so that no provisioner run withdraws another workload's consumers.
type mesh struct {
	dir, file, resource string
}

func (b *bench) newMesh(resource string) (*mesh, error) {
	dir := filepath.Join(b.root, resource)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return &mesh{dir: dir, file: filepath.Join(dir, "contributions.json"), resource: resource}, nil
}

// consumers are n new consumers, with names no earlier round used and fresh passwords.
func (b *bench) consumers(tag string, n int) ([]consumer, error) {
	b.serial++
	out := make([]consumer, n)
	for i := range out {
		pw := make([]byte, 16)
		if _, err := rand.Read(pw); err != nil {
			return nil, err
		}
		out[i] = consumer{name: fmt.Sprintf("cmp_%s_%d_%05d", tag, b.serial, i), password: hex.EncodeToString(pw)}
	}
	return out, nil
}

func (m *mesh) secret(name string) string { return filepath.Join(m.dir, name+".postgres") }

// give writes each consumer's secret, then replaces the contributions file by rename, as the
// mesh does; each consumer names ext where it is not empty.
func (m *mesh) give(cs []consumer, ext string) error {
	for _, c := range cs {
		if err := replace(m.secret(c.name), []byte(c.password+"\n")); err != nil {
			return err
		}
	}
	return m.write(cs, ext, func() {})
}

// contents is the contributions file that lists cs, each naming ext where it is not empty.
func (m *mesh) contents(cs []consumer, ext string) ([]byte, error) {
	exts := []string{}
	if ext != "" {
		exts = []string{ext}
	}
	given := make([]any, 0, len(cs))
	for _, c := range cs {
		given = append(given, map[string]any{"as": c.name, "secret": m.secret(c.name), "node": c.name, "at": "127.0.0.1",
			"values": map[string]any{"name": c.name, "extensions": exts}})
	}
	return json.Marshal(map[string]any{"requirement": m.resource, "given": given})
}

// aged dates the contributions file a minute back: settled for any --withdraw-settle shorter.
func (m *mesh) aged() error {
	past := time.Now().Add(-time.Minute)
	return os.Chtimes(m.file, past, past)
}

func replace(path string, content []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, content, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// provEnv is this process's environment for the provisioner, the server's URL in
// PROVISIONER_DATABASE_URL (never on the command line), and no other PROVISIONER_* variable
// nor DATABASE_URL that could change what it does.
func (b *bench) provEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PROVISIONER_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			env = append(env, kv)
		}
	}
	return append(env, "PROVISIONER_DATABASE_URL="+b.provURL)
}

// once runs `provisioner --once` over m with --parallel p and more flags, and times it to its
// exit, which must be 0. The run is bounded by the timeout and by ctx; the provisioner runs in
// a process group of its own, which is killed on either.
func (b *bench) once(ctx context.Context, m *mesh, p int, more ...string) (measure, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.timeout)
	defer cancel()
	args := append([]string{"--once", "--receives", m.file, "--resource", m.resource, "--parallel", strconv.Itoa(p)}, more...)
	cmd := exec.CommandContext(ctx, b.opts.bin, args...)
	cmd.Env = b.provEnv()
	out := &tail{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	mach0 := machineCPU()
	start := time.Now()
	err := cmd.Run()
	m0 := measure{wall: time.Since(start), machine: machineCPU() - mach0}
	if cmd.ProcessState != nil {
		m0.client = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	switch {
	case ctx.Err() != nil:
		return m0, fmt.Errorf("provisioner --once %s: %w", strings.Join(more, " "), ctx.Err())
	case err != nil:
		return m0, fmt.Errorf("provisioner --once %s: %w; it said:\n%s", strings.Join(more, " "), err, out.String())
	}
	return m0, nil
}

// tail keeps the last 8 KiB a process wrote, for the error that says why it failed. The
// provisioner scrubs passwords from what it says.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 8<<10 {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-8<<10:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// daemon is the provisioner running as a daemon, in a process group of its own.
type daemon struct {
	cmd    *exec.Cmd
	listen string
	out    *tail
	exited chan struct{}
	client *http.Client
}

func (b *bench) startDaemon(m *mesh, args ...string) (*daemon, error) {
	listen, err := pgserver.FreeAddr()
	if err != nil {
		return nil, err
	}
	d := &daemon{listen: listen, out: &tail{}, exited: make(chan struct{}), client: &http.Client{Timeout: 5 * time.Second}}
	args = append([]string{"--receives", m.file, "--resource", m.resource, "--listen", listen}, args...)
	d.cmd = exec.Command(b.opts.bin, args...)
	d.cmd.Env = b.provEnv()
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the provisioner: %w", err)
	}
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
	return d, nil
}

// stop ends the daemon with SIGTERM (its pass under way finishes, bounded by its holds
// timeout), and kills its group where it has not ended within grace.
func (d *daemon) stop(grace time.Duration) {
	_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(grace):
		fmt.Fprintf(os.Stderr, "compare: the provisioner did not stop within %s of SIGTERM; killed\n", grace)
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-d.exited
	}
}

var errExited = errors.New("the provisioner exited")

// metric is the value of the first sample of /metrics whose name is name and whose labels
// include labels (e.g. `state="applied"`; "": any, or none), -1 where there is none yet.
func (d *daemon) metric(ctx context.Context, name, labels string) (float64, error) {
	select {
	case <-d.exited:
		return 0, fmt.Errorf("%w; it said:\n%s", errExited, d.out.String())
	default:
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.listen+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return -1, nil // not listening yet
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return -1, nil
	}
	pattern := `(?m)^` + regexp.QuoteMeta(name) + `(?:\{[^}]*\})? (\S+)$` // a sample without labels too (go_memstats_...)
	if labels != "" {
		pattern = `(?m)^` + regexp.QuoteMeta(name) + `\{[^}]*` + regexp.QuoteMeta(labels) + `[^}]*\} (\S+)$`
	}
	match := regexp.MustCompile(pattern).FindSubmatch(body)
	if match == nil {
		return -1, nil
	}
	return strconv.ParseFloat(string(bytes.TrimSpace(match[1])), 64)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
