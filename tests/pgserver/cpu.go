package pgserver

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Postmaster is the postmaster of the server one of whose backends is backend (as
// pg_backend_pid() names it): its parent, from /proc. It fails where the server is not a
// process of this machine that /proc shows.
func Postmaster(backend int) (int, error) {
	fields, err := statFields(backend)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(fields[1]) // ppid
}

// CPU is the CPU time the server of postmaster pm has used so far: the postmaster's own, its
// exited children's (those it has waited for: cutime, cstime) and its live children's, from
// /proc; the server's, whatever its sessions did.
func CPU(pm int) (time.Duration, error) {
	return cpuOf(pm, func(int) bool { return true })
}

// SessionsCPU is the CPU time the sessions of the server of postmaster pm have used so far: the
// postmaster's own (it forks them), its exited children's (cutime, cstime: sessions ended, and
// any worker that ended), its live client backends' and those ended but not yet waited for
// (their time moves to cutime when they are), from /proc; not its background processes' (the
// checkpointer, the writers, the launchers), whose work no client ordered and whose
// checkpoints fall into one window or the next.
func SessionsCPU(pm int) (time.Duration, error) {
	return cpuOf(pm, func(pid int) bool {
		title, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		return len(title) == 0 || clientBackend.Match(title) // an ended session not yet waited for has no title
	})
}

// cpuOf is the CPU time of postmaster pm, its exited children and those of its live children
// counts answers true for.
func cpuOf(pm int, counts func(pid int) bool) (time.Duration, error) {
	fields, err := statFields(pm)
	if err != nil {
		return 0, err
	}
	ticks := sumFields(fields, 11, 12, 13, 14) // utime stime cutime cstime
	raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pm, pm))
	for _, c := range strings.Fields(string(raw)) {
		pid, _ := strconv.Atoi(c)
		if !counts(pid) {
			continue
		}
		if f, err := statFields(pid); err == nil {
			ticks += sumFields(f, 11, 12)
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil // USER_HZ is 100 on Linux
}

// clientBackend matches the process title of a client's session: its host and port, or
// [local] ("postgres: user db 127.0.0.1(5432) idle"); a background process names itself.
var clientBackend = regexp.MustCompile(`\(\d+\)|\[local\]`)

// statFields is /proc/pid/stat's fields after the command's name: [0] is the state, [1] the
// parent, [11] utime, [19] the start time.
func statFields(pid int) ([]string, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 15 {
		return nil, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	return fields, nil
}

func sumFields(fields []string, at ...int) int64 {
	var t int64
	for _, i := range at {
		v, _ := strconv.ParseInt(fields[i], 10, 64)
		t += v
	}
	return t
}
