package postgres_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// serverCPU is the CPU the test's PostgreSQL server has used so far: its postmaster's own,
// what its ended children used (reaped: cutime, cstime) and what its live ones have used, from
// /proc. ok is false where the server is not a process of this machine that /proc shows.
func serverCPU(tb testing.TB, e *env) (used time.Duration, ok bool) {
	tb.Helper()
	var backend int
	conn := e.admin("")
	err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend)
	conn.Close(ctx)
	if err != nil {
		return 0, false
	}
	postmaster, ok := parentOf(backend)
	if !ok {
		return 0, false
	}
	f, ok := statFields(postmaster)
	if !ok {
		return 0, false
	}
	ticks := f[11] + f[12] + f[13] + f[14] // utime stime cutime cstime
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, _ := strconv.Atoi(filepath.Base(d))
		if g, ok := statFields(pid); ok && g[1] == int64(postmaster) {
			ticks += g[11] + g[12]
		}
	}
	return time.Duration(ticks) * time.Second / 100, true // USER_HZ
}

// parentOf is pid's parent, from /proc.
func parentOf(pid int) (int, bool) {
	f, ok := statFields(pid)
	if !ok {
		return 0, false
	}
	return int(f[1]), true
}

// statFields are /proc/pid/stat's numeric fields after the command (state is 0): f[1] the
// parent, f[11] to f[14] utime, stime, cutime and cstime in clock ticks.
func statFields(pid int) ([]int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, false
	}
	words := strings.Fields(s[i+1:])
	if len(words) < 15 {
		return nil, false
	}
	out := make([]int64, len(words))
	for k, w := range words[1:] {
		out[k+1], _ = strconv.ParseInt(w, 10, 64)
	}
	return out, true
}
