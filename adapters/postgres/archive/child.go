package archive

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// child is one program the archiver runs: in a process group of its own, killed with it when
// ctx ends or the daemon dies, its standard error kept to say why it failed.
type child struct {
	cmd    *exec.Cmd
	stderr *tail
}

// command is a child running path with args, in src's environment.
func (a *Archiver) command(ctx context.Context, src Source, path string, args ...string) *child {
	if src.Role != "" {
		args = append([]string{"--role=" + src.Role}, args...)
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = environ(src.Env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	c := &child{cmd: cmd, stderr: &tail{}}
	cmd.Stderr = c.stderr
	return c
}

// environ is a minimal environment (PATH, HOME, LANG, TMPDIR: none of libpq's variables this
// process has), with extra added.
func environ(extra []string) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, extra...)
}

func (c *child) start() error { return c.cmd.Start() }

// kill ends the child's process group at once; wait still reaps it.
func (c *child) kill() { _ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL) }

// run starts the child and waits for it; what names it in an error.
func (c *child) run(what string) error {
	if err := c.start(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return c.wait(what)
}

// wait waits for the child, and answers its failure with the last line it wrote to stderr.
func (c *child) wait(what string) error {
	err := c.cmd.Wait()
	if err == nil {
		return nil
	}
	line := c.stderr.last()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() >= 0 && line != "":
		return fmt.Errorf("%s exited with status %d: %s", what, exit.ExitCode(), line)
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		return fmt.Errorf("%s exited with status %d", what, exit.ExitCode())
	case line != "":
		return fmt.Errorf("%s: %v: %s", what, err, line)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// tail keeps the last few kB a child wrote to its standard error.
type tail struct{ buf []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - 4096; over > 0 {
		t.buf = t.buf[over:]
	}
	return len(p), nil
}

// last is the last line that says an error ("pg_dump: error: ..."), else the last that is not
// blank: what follows an error (its detail, the query) says less than it.
func (t *tail) last() string {
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "error: ") {
			return strings.TrimSpace(lines[i])
		}
	}
	return strings.TrimSpace(lines[len(lines)-1])
}
