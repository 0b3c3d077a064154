package pgserver

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// Group is a child process that leads a process group of its own: a signal meant for it reaches
// what it started too, and a signal meant for its parent's group (a Ctrl-C) does not reach it.
// The kernel signals it when the process that started it dies, however that process dies
// (SIGKILL, a test timeout, a panic), so that nothing it started outlives it.
type Group struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// StartGroup starts cmd as the leader of a new process group; the kernel sends it onDeath when
// this process dies. A Credential already in cmd.SysProcAttr is kept: Go sets the parent-death
// signal after changing the credential, where the kernel would otherwise clear it.
func StartGroup(cmd *exec.Cmd, onDeath syscall.Signal) (*Group, error) {
	attr := &syscall.SysProcAttr{}
	if cmd.SysProcAttr != nil {
		attr.Credential = cmd.SysProcAttr.Credential
	}
	attr.Setpgid = true
	setDeathSignal(attr, onDeath)
	cmd.SysProcAttr = attr
	g := &Group{cmd: cmd, exited: make(chan struct{})}
	started := make(chan error, 1)
	// The parent-death signal follows the thread that forked the child, not the process: this
	// goroutine keeps its thread, and the thread lives, until the child has exited. Otherwise
	// the runtime could end that thread (it ends the thread of a goroutine that exits locked)
	// and the kernel would signal the child while this process still runs.
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		g.err = cmd.Wait()
		close(g.exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return g, nil
}

// Pid is the leader's process id, which is also the group's id.
func (g *Group) Pid() int { return g.cmd.Process.Pid }

// Exited is closed once the leader has exited.
func (g *Group) Exited() <-chan struct{} { return g.exited }

// Err is what waiting for the leader answered; call it once Exited is closed.
func (g *Group) Err() error { return g.err }

// ExitCode is the leader's exit code, -1 while it runs or when a signal ended it.
func (g *Group) ExitCode() int {
	select {
	case <-g.exited:
		return g.cmd.ProcessState.ExitCode()
	default:
		return -1
	}
}

// Signal sends sig to every process of the group.
func (g *Group) Signal(sig syscall.Signal) error {
	select {
	case <-g.exited:
		return errors.New("the process has exited")
	default:
	}
	return syscall.Kill(-g.Pid(), sig)
}

// Wait waits up to limit for the leader to exit, and answers whether it did.
func (g *Group) Wait(limit time.Duration) bool {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-g.exited:
		return true
	case <-timer.C:
		return false
	}
}

// Stop sends sig to the group and waits up to grace for the leader to exit; then it kills what
// is left of the group and waits for the leader. It answers whether the leader exited within
// grace.
func (g *Group) Stop(sig syscall.Signal, grace time.Duration) bool {
	_ = g.Signal(sig)
	inTime := g.Wait(grace)
	if !inTime {
		_ = syscall.Kill(-g.Pid(), syscall.SIGKILL) // the leader is not reaped yet: the group is still ours
		<-g.exited
	}
	// A member that outlived its leader (one that ignored sig) goes too. The leader was reaped
	// an instant ago, and its id stays the group's while any member is left.
	_ = syscall.Kill(-g.Pid(), syscall.SIGKILL)
	return inTime
}

// RunGroup runs cmd in a group of its own for at most limit (the kernel kills it where this
// process dies first), and answers what it wrote (stdout and stderr), or an error with the end
// of that when it fails or takes longer.
func RunGroup(cmd *exec.Cmd, limit time.Duration) ([]byte, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	g, err := StartGroup(cmd, syscall.SIGKILL)
	if err != nil {
		return nil, err
	}
	if !g.Wait(limit) {
		g.Stop(syscall.SIGKILL, time.Second)
		return nil, fmt.Errorf("%s: still running after %s, killed: %s", cmd, limit, tail(out.Bytes()))
	}
	if g.Err() != nil {
		return nil, fmt.Errorf("%s: %w: %s", cmd, g.Err(), tail(out.Bytes()))
	}
	return out.Bytes(), nil
}

// tail is the end of a command's output, enough to say why it failed.
func tail(raw []byte) string {
	if len(raw) > 2000 {
		raw = raw[len(raw)-2000:]
	}
	return string(bytes.TrimSpace(raw))
}
