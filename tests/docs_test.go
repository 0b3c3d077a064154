package tests

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestTheREADMEsUnitIsThePackagedOne: a deployer who copies the README's unit gets what the
// package installs, not an older one.
func TestTheREADMEsUnitIsThePackagedOne(t *testing.T) {
	is := is.New(t)
	readme, err := os.ReadFile("../README.md")
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
