package pgserver

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// PgDump is a pg_dump of major or later, where this machine has one: the one beside the local
// server's binaries (local may be nil), else PATH's; "" where neither is new enough, with the
// places looked at, for the test to say why it skips.
func PgDump(local *Server, major int) (string, []string) {
	var places []string
	if local != nil {
		places = append(places, filepath.Join(local.Bin, "pg_dump"))
	}
	if p, err := exec.LookPath("pg_dump"); err == nil {
		places = append(places, p)
	}
	for _, p := range places {
		if n, _ := DumpMajor(p); n >= major {
			return p, places
		}
	}
	return "", places
}

var dumpVersion = regexp.MustCompile(`\(PostgreSQL\) (\d+)`)

// DumpMajor is the major version of the pg_dump at path, and its version line; 0 where it
// cannot be run.
func DumpMajor(path string) (int, string) {
	out, err := exec.Command(path, "--version").Output()
	m := dumpVersion.FindSubmatch(out)
	if err != nil || m == nil {
		return 0, ""
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n, strings.TrimSpace(string(out))
}
