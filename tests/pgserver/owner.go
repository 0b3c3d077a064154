package pgserver

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Every server folder records its owner, the process that started the server in it. A process
// killed outright (SIGKILL, a test timeout) cannot stop its servers; the kernel's parent-death
// signal does that at once, and where it could not, the next Start of any test binary finds
// the folder of a dead owner and stops what still runs in it. A server whose owner lives is
// never touched.

// ownerFile is the name of the record in a server's folder.
const ownerFile = "owner"

// owner is a process, told apart from a later one that got the same pid by its start time,
// and from one of an earlier boot by the boot's id.
type owner struct {
	pid         int
	start, boot string // "-" where this system does not say
}

func self() owner {
	pid := os.Getpid()
	start, _ := procStat(pid)
	return owner{pid: pid, start: start, boot: bootID()}
}

func (o owner) String() string { return fmt.Sprintf("%d %s %s\n", o.pid, o.start, o.boot) }

// alive is whether the owner still runs: a zombie, a reused pid or an earlier boot's process is not.
func (o owner) alive() bool {
	if o.boot != bootID() {
		return false
	}
	if o.start == "-" { // no /proc: the pid is all there is to go by
		err := syscall.Kill(o.pid, 0)
		return err == nil || errors.Is(err, syscall.EPERM)
	}
	start, zombie := procStat(o.pid)
	return start == o.start && !zombie
}

// procStat is a process's start time (clock ticks after boot) and whether it is a zombie; the
// start time is "-" where /proc cannot tell.
func procStat(pid int) (start string, zombie bool) {
	fields, err := statFields(pid)
	if err != nil || len(fields) < 20 {
		return "-", false
	}
	return fields[19], fields[0] == "Z"
}

func bootID() string {
	raw, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "-"
	}
	return strings.TrimSpace(string(raw))
}

func writeOwner(dir string) error {
	return os.WriteFile(filepath.Join(dir, ownerFile), []byte(self().String()), 0o644)
}

// readOwner is the owner recorded in dir; ok is false where none is.
func readOwner(dir string) (o owner, ok bool) {
	raw, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		return owner{}, false
	}
	fields := strings.Fields(string(raw))
	if len(fields) != 3 {
		return owner{}, false
	}
	pid, err := strconv.Atoi(fields[0])
	if err != nil {
		return owner{}, false
	}
	return owner{pid: pid, start: fields[1], boot: fields[2]}, true
}

// root is the folder that NewDir and Start make server folders in, one for each user, so that
// a sweep only ever meets that user's servers. The postgres OS user may traverse it.
func root() (string, error) {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("novox-pgserver-%d", os.Geteuid()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return dir, os.Chmod(dir, 0o755) // whatever the umask
}

// NewDir makes a folder for servers of this process, in the folder the sweep looks in: once
// this process is dead, the next sweep stops any server left in it and removes it. The postgres
// OS user may traverse it. The caller removes it when done.
func NewDir() (string, error) {
	sweepOnce()
	r, err := root()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(r, "pg-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	if err := writeOwner(dir); err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

var swept sync.Once

// sweepOnce sweeps the first time this process asks for a server folder: what a killed test
// binary left is gone by the time the next one starts its servers.
func sweepOnce() { swept.Do(func() { _ = sweep() }) }

// ownerless is how old a folder without an owner record must be before a sweep takes it for
// abandoned: NewDir writes the record just after making the folder.
const ownerless = time.Hour

// sweep stops the servers left in the root's folders by owners that are dead, and removes
// those folders; a folder of a live owner, or holding a server of one, stays.
func sweep() error {
	r, err := root()
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(r)
	if err != nil {
		return err
	}
	for _, e := range entries {
		dir := filepath.Join(r, e.Name())
		if !e.IsDir() {
			continue // the lock file of the pgvector build
		}
		o, ok := readOwner(dir)
		if !ok {
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > ownerless {
				_ = os.RemoveAll(dir)
			}
			continue
		}
		if o.alive() {
			continue
		}
		if stopOrphans(dir) == nil {
			_ = os.RemoveAll(dir)
		}
	}
	return nil
}

// stopOrphans stops every server under top whose owner is dead; it answers an error when a
// server there has a live owner, or one could not be stopped.
func stopOrphans(top string) error {
	var errs []error
	_ = filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if d.Name() == "data" || strings.Count(strings.TrimPrefix(path, top), string(filepath.Separator)) > 3 {
			return filepath.SkipDir // a data folder's insides, or deeper than any server folder is
		}
		if o, ok := readOwner(path); ok && o.alive() {
			errs = append(errs, fmt.Errorf("the server in %s belongs to process %d, which is running", path, o.pid))
		} else if ok {
			errs = append(errs, StopOrphan(path))
		}
		return nil
	})
	return errors.Join(errs...)
}

// StopOrphan stops the server that a dead process started in dir (a Dir of Start), if one
// still runs there. It refuses, with an error, when the process that started it is another
// one and alive. A folder without a record of its owner has no server Start made.
func StopOrphan(dir string) error {
	o, ok := readOwner(dir)
	switch {
	case !ok || o.pid == os.Getpid() && o.alive():
		return nil // none, or ours: Stop is for those
	case o.alive():
		return fmt.Errorf("the server in %s belongs to process %d, which is running", dir, o.pid)
	}
	data, err := filepath.Abs(filepath.Join(dir, "data"))
	if err != nil {
		return err
	}
	pid := postmaster(data)
	if pid == 0 {
		return nil
	}
	return stopProcess(pid, 30*time.Second)
}

// postmaster is the pid of the server running on data, 0 where none is. The pid in
// postmaster.pid counts only when that process is a postgres started on this very folder: a
// stale file may name a pid some other process has now.
func postmaster(data string) int {
	raw, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0]))
	if err != nil || pid <= 0 {
		return 0
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return 0
	}
	args := strings.Split(string(cmdline), "\x00")
	if filepath.Base(args[0]) != "postgres" {
		return 0
	}
	for i := 1; i+1 < len(args); i++ {
		if args[i] == "-D" && filepath.Clean(args[i+1]) == data {
			return pid
		}
	}
	return 0
}

// exited is whether the process has ended: it is gone, or a zombie its parent has not reaped
// yet (a PID 1 may reap late).
func exited(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	_, zombie := procStat(pid)
	return zombie
}

// stopProcess stops a server that is not our child: immediate shutdown (its data is thrown
// away), then SIGKILL if it is still there after grace.
func stopProcess(pid int, grace time.Duration) error {
	for _, sig := range []syscall.Signal{syscall.SIGQUIT, syscall.SIGKILL} {
		if err := syscall.Kill(pid, sig); err != nil {
			if errors.Is(err, syscall.ESRCH) {
				return nil
			}
			return fmt.Errorf("stop the stale server %d: %w", pid, err)
		}
		for deadline := time.Now().Add(grace); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if exited(pid) {
				return nil
			}
		}
	}
	return fmt.Errorf("the stale server %d did not stop", pid)
}
