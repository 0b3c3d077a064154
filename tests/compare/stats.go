package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// machineCPU is the busy CPU time of the whole machine since boot, from /proc/stat (0 where
// it cannot be read): over a run, the server's, the client's and everything else's.
func machineCPU() time.Duration {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := bytes.Cut(raw, []byte("\n"))
	fields := strings.Fields(string(line))
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0
	}
	var ticks int64
	for i, f := range fields[1:9] { // user nice system idle iowait irq softirq steal
		if i == 3 || i == 4 {
			continue // idle, iowait
		}
		v, _ := strconv.ParseInt(f, 10, 64)
		ticks += v
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// processCPU is the CPU time (user and system) the process pid has used, from /proc/pid/stat
// (0 where it cannot be read): the daemon's, which runs on past a measure.
func processCPU(pid int) time.Duration {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndex(raw, []byte(") ")) // after the command's name, which may hold ") "
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(raw[i+2:]))
	if len(fields) < 13 { // state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// statementCount is what one timed run sent the server, from its log (-statements): the
// statements logged with the server's time for each, and the connections authorised.
type statementCount struct {
	workload, side string
	n              int
	statements     int
	took           time.Duration
	connections    int
	// checkpoints are the checkpoints the server started meanwhile: before PostgreSQL 16, each
	// DROP DATABASE asks for one and waits for it (concurrent drops share one).
	checkpoints int
	kinds       map[string]*kindCount
}

// kindCount is one kind of statement: how many ran, and the server's time for them (parse,
// bind and execute).
type kindCount struct {
	n    int
	took time.Duration
}

var (
	logDuration   = regexp.MustCompile(`LOG:  duration: ([0-9.]+) ms  (statement|parse|bind|execute)[^:]*: ?(.*)$`)
	logConnection = regexp.MustCompile(`LOG:  connection authorized:`)
	logCheckpoint = regexp.MustCompile(`LOG:  checkpoint starting:`)
	quotedIdent   = regexp.MustCompile(`"[^"]*"`)
	quotedString  = regexp.MustCompile(`'(?:[^']|'')*'`)
	spaces        = regexp.MustCompile(`\s+`)
)

// statementSettings make the server log every statement with its duration, and every
// connection. The provisioner's role transaction turns that logging off for itself, by design.
var statementSettings = map[string]string{"log_min_duration_statement": "0", "log_connections": "on", "log_checkpoints": "on"}

// counted runs fn and, with -statements and count set, counts what the server logged meanwhile.
func (b *bench) counted(wl, side string, n int, count bool, fn func() (measure, error)) (measure, error) {
	if !b.opts.statements || !count {
		return fn()
	}
	from := fileSize(b.srv.LogPath)
	m, err := fn()
	if err != nil {
		return m, err
	}
	time.Sleep(100 * time.Millisecond) // the last backends' lines
	c, err := countLog(b.srv.LogPath, from)
	if err != nil {
		return m, fmt.Errorf("count statements: %w", err)
	}
	c.workload, c.side, c.n = wl, side, n
	b.counts = append(b.counts, c)
	return m, nil
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// countLog counts the statements and connections logged from offset on. A statement's kind is
// its first line with names and string constants blanked (no password is ever shown).
func countLog(path string, offset int64) (statementCount, error) {
	c := statementCount{kinds: map[string]*kindCount{}}
	f, err := os.Open(path)
	if err != nil {
		return c, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return c, err
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var pending *statementLine // a statement whose text starts on the next line
	add := func(l statementLine, text string) {
		k := c.kinds[kind(text)]
		if k == nil {
			k = &kindCount{}
			c.kinds[kind(text)] = k
		}
		k.took += l.took
		c.took += l.took
		if l.counts {
			k.n++
			c.statements++
		}
	}
	for sc.Scan() {
		line := sc.Text()
		if pending != nil {
			l := *pending
			pending = nil
			if strings.TrimSpace(line) != "" && !strings.Contains(line, " LOG:  ") {
				add(l, line)
				continue
			}
			add(l, "(empty)")
		}
		if logConnection.MatchString(line) {
			c.connections++
			continue
		}
		if logCheckpoint.MatchString(line) {
			c.checkpoints++
			continue
		}
		m := logDuration.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		ms, _ := strconv.ParseFloat(m[1], 64)
		l := statementLine{took: time.Duration(ms * float64(time.Millisecond)), counts: m[2] == "statement" || m[2] == "execute"}
		if strings.TrimSpace(m[3]) == "" {
			pending = &l
			continue
		}
		add(l, m[3])
	}
	return c, sc.Err()
}

type statementLine struct {
	took   time.Duration
	counts bool // a statement run (not the parse or bind of one)
}

func kind(sql string) string {
	s := quotedString.ReplaceAllString(sql, "'…'")
	s = quotedIdent.ReplaceAllString(s, `"x"`)
	s = strings.TrimSpace(spaces.ReplaceAllString(s, " "))
	if r := []rune(s); len(r) > 72 {
		s = string(r[:72]) + "…"
	}
	return s
}

// topKinds are c's statement kinds, those that took the server longest first.
func (c statementCount) topKinds() []string {
	out := make([]string, 0, len(c.kinds))
	for k := range c.kinds {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if c.kinds[out[i]].took != c.kinds[out[j]].took {
			return c.kinds[out[i]].took > c.kinds[out[j]].took
		}
		return out[i] < out[j]
	})
	return out
}
