package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestTheDocumentedUnitIsThePackagedOne: a deployer who copies the unit of docs/deploy.md gets
// what the package installs, not an older one.
func TestTheDocumentedUnitIsThePackagedOne(t *testing.T) {
	is := is.New(t)
	readme, err := os.ReadFile("../docs/deploy.md")
	is.NoErr(err)
	unit, err := os.ReadFile("../deploy/systemd/novox-provisioner.service")
	is.NoErr(err)
	is.True(strings.Contains(string(readme), "```ini\n"+string(unit)+"```\n")) // the packaged unit, word for word
}

// TestTheREADMEOpensWithTheTwoCommands: the README's first block is `make run` and `make
// test`, as written, and each is the target the tests drive: make run runs tests/run (what
// makerun_test.go runs), make test every package under the race detector.
func TestTheREADMEOpensWithTheTwoCommands(t *testing.T) {
	is := is.New(t)
	readme, err := os.ReadFile("../README.md")
	is.NoErr(err)
	text := string(readme)
	first := strings.Index(text, "```sh\n")
	is.True(first >= 0 && first < strings.Index(text, "## Requirements")) // before the deployer's sections
	block, _, _ := strings.Cut(text[first+len("```sh\n"):], "```")
	var commands []string
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		command, _, _ := strings.Cut(line, "#")
		commands = append(commands, strings.TrimSpace(command))
	}
	is.Equal(commands, []string{"make run", "make test"}) // the two commands, as written
	for _, c := range []struct{ command, runs string }{
		{commands[0], "go build -o bin/run ./tests/run"},
		{commands[1], "go test -race -count=1 -timeout 30m ./..."},
	} {
		args := strings.Fields(c.command)
		cmd := exec.Command(args[0], append([]string{"-n", "-C", ".."}, args[1:]...)...)
		cmd.Env = asTyped(os.Environ())
		out, err := cmd.CombinedOutput()
		is.NoErr(err)                                  // make knows the target
		is.True(strings.Contains(string(out), c.runs)) // and it runs what the tests drive
	}
}

// asTyped is env without what an enclosing make passes down (its command line's variables in
// MAKEFLAGS, PKGS and PG where exported): the commands run as a reader types them. Under
// `make test PKGS=...` (as .ci/run runs the older servers), make test would otherwise test
// PKGS, not every package.
func asTyped(env []string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "PKGS", "PG":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// TestTheREADMEAndARCHITECTUREStayShort: the README is for deployers and ARCHITECTURE.md a map
// of the code; figures, flags, lines and history have pages of their own (docs/).
func TestTheREADMEAndARCHITECTUREStayShort(t *testing.T) {
	for _, c := range []struct {
		file string
		most int
	}{{"../README.md", 250}, {"../ARCHITECTURE.md", 300}} {
		raw, err := os.ReadFile(c.file)
		is.New(t).NoErr(err)
		if n := strings.Count(string(raw), "\n"); n > c.most {
			t.Errorf("%s has %d lines, more than %d: move what is not for its reader to docs/", c.file, n, c.most)
		}
	}
}

// metricName is a metric the provider registers, as its source names it.
var metricName = regexp.MustCompile(`Name:\s*"(provisioner_[a-z_]+)"`)

// TestEveryMetricHasARowInTheMetricsTable: a metric the provider registers (app/) and the
// metrics table of docs/operations.md does not list fails here, so that none is added unsaid.
func TestEveryMetricHasARowInTheMetricsTable(t *testing.T) {
	is := is.New(t)
	doc, err := os.ReadFile("../docs/operations.md")
	is.NoErr(err)
	sources, err := filepath.Glob("../app/*.go")
	is.NoErr(err)
	seen := 0
	for _, path := range sources {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		is.NoErr(err)
		for _, m := range metricName.FindAllStringSubmatch(string(src), -1) {
			seen++
			if !regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(m[1]) + "[`{]").Match(doc) {
				t.Errorf("%s (registered in %s) has no row in the metrics table of docs/operations.md", m[1], path)
			}
		}
	}
	is.True(seen > 10) // the metrics were found where they are registered
}

// helpFlag is a flag as --help lists it: its name, and what it takes.
var helpFlag = regexp.MustCompile(`(?m)^  --([a-z-]+)( [^ \[]+)?  (\[|$)`)

// TestEveryFlagIsInTheHelpWithAPlaceholderAndInTheDocs: each flag --help lists has a row in
// docs/configuration.md's table, and each that takes a value names what it takes (--every
// DURATION); the switches (--once, --metrics-per-consumer) and --version and --help take none.
func TestEveryFlagIsInTheHelpWithAPlaceholderAndInTheDocs(t *testing.T) {
	is := is.New(t)
	out, err := exec.Command(binary, "--help").CombinedOutput()
	is.NoErr(err)
	doc, err := os.ReadFile("../docs/configuration.md")
	is.NoErr(err)
	switches := map[string]bool{"once": true, "metrics-per-consumer": true, "version": true, "help": true}
	found := helpFlag.FindAllStringSubmatch(string(out), -1)
	is.True(len(found) > 20) // the flags were found in --help
	for _, m := range found {
		name, placeholder := m[1], strings.TrimSpace(m[2])
		if placeholder == "" && !switches[name] {
			t.Errorf("--%s has no placeholder in --help (e.g. --every DURATION)", name)
		}
		if name == "version" || name == "help" {
			continue
		}
		if !strings.Contains(string(doc), "| `--"+name+"`") && !strings.Contains(string(doc), "| `--"+name+" ") {
			t.Errorf("--%s has no row in docs/configuration.md", name)
		}
	}
}

// TestTheREADMEsTimingsAreTheLastCIRuns: the README's figures for make test and CI's whole run
// are those .ci/timings keeps of CI's last run, not an older run's.
func TestTheREADMEsTimingsAreTheLastCIRuns(t *testing.T) {
	is := is.New(t)
	raw, err := os.ReadFile("../.ci/timings")
	is.NoErr(err)
	readme, err := os.ReadFile("../README.md")
	is.NoErr(err)
	text := strings.Join(strings.Fields(string(readme)), " ")
	figure := func(name string) string {
		m := regexp.MustCompile(`(?m)^\.ci/run: ` + regexp.QuoteMeta(name) + `: (\d+) s`).FindStringSubmatch(string(raw))
		if m == nil {
			t.Fatalf(".ci/timings has no figure for %s", name)
		}
		return m[1]
	}
	is.True(strings.Contains(text, "`make test` took "+figure("PostgreSQL 15 (Debian, pgvector), all")+" s in CI's last run")) // the whole suite on 15
	is.True(strings.Contains(text, figure("PostgreSQL 18, all")+" s with `PG=18`"))
	is.True(strings.Contains(text, "took "+figure("total")+" s in all"))
}
