package tests

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/tests/pgserver"
)

func TestOnceExitCodes(t *testing.T) {
	url := pgserver.Shared(t).URL
	cases := []struct {
		name  string
		setup func(m *mesh)
		url   string
		code  int
	}{
		{"every consumer created", func(m *mesh) { m.give(consumer{as: name("once"), password: randomHex(8)}) }, url, 0},
		{"nobody listed", func(m *mesh) { m.give() }, url, 0},
		{"a secret missing", func(m *mesh) {
			c := consumer{as: name("once"), password: randomHex(8)}
			m.give(c, consumer{as: name("once"), password: randomHex(8)})
			_ = os.Remove(m.secret(c.as))
		}, url, 1},
		{"the file torn", func(m *mesh) { m.writeFile(m.file, `{"given": [`) }, url, 1},
		{"no file", func(m *mesh) {}, url, 1},
		{"the server down", func(m *mesh) { m.give(consumer{as: name("once"), password: randomHex(8)}) },
			"postgres://postgres:x@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2", 1},
		{"a hostile name", func(m *mesh) { m.give(consumer{as: "pg_evil", password: randomHex(8)}) }, url, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			m := newMesh(t)
			c.setup(m)
			code, out := runOnce(t, nil, m.args("--once", "--database-url", c.url)...)
			is.Equal(code, c.code) // the exit code says whether every consumer is there
			if c.code == 1 {
				is.True(out != "") // and why not, in the loop's words
			}
		})
	}
}

func TestUsageErrorsAreOneLineAndExitTwo(t *testing.T) {
	// A provisioner that holds its --listen address, so that another cannot have it.
	hold := start(t, nil, "--receives", "/nonexistent/c.json", "--database-url", "postgres://127.0.0.1:1/x")
	eventually(t, "the address taken", func() bool { code, _ := hold.get("/healthz"); return code == 200 })
	taken := hold.listen
	cases := []struct {
		name string
		env  []string
		args []string
		says string
	}{
		{"no receives", nil, nil, "provisioner: --receives is required (or PROVISIONER_RECEIVES): the contributions file to read (see --help)"},
		{"unknown flag", nil, []string{"--nope"}, "provisioner: unknown flag --nope (see --help)"},
		{"bad duration", nil, []string{"--receives", "c", "--every", "soon"}, `provisioner: invalid value "soon" for --every: want a duration such as 5s, 1m30s or 250ms (see --help)`},
		{"a number for a duration", []string{"PROVISIONER_EVERY=5"}, []string{"--receives", "c"}, `provisioner: PROVISIONER_EVERY="5": want a duration such as 5s, 1m30s or 250ms (see --help)`},
		{"bad log level", nil, []string{"--receives", "c", "--log-level", "loud"}, `provisioner: invalid value "loud" for --log-level: slog: level string "loud": unknown name (see --help)`},
		{"zero duration", nil, []string{"--receives", "c", "--verify-every", "0s"}, "provisioner: --verify-every 0s: want a positive duration (see --help)"},
		{"zero login interval", nil, []string{"--receives", "c", "--login-check-every", "0s"}, "provisioner: --login-check-every 0s: want a positive duration (see --help)"},
		{"no login rate", nil, []string{"--receives", "c", "--login-rate", "0"}, "provisioner: --login-rate 0: want at least 1 login a second (see --help)"},
		{"a settle that holds nothing", nil, []string{"--receives", "c", "--withdraw-settle", "1ns"}, "provisioner: --withdraw-settle 1ns: want at least 1s (see --help)"},
		{"bad policy", nil, []string{"--receives", "c", "--on-withdraw", "shred"}, `provisioner: invalid value "shred" for --on-withdraw: want retain or drop (see --help)`},
		{"bad log format", nil, []string{"--receives", "c", "--log-format", "xml"}, `provisioner: --log-format "xml": want text or json (see --help)`},
		{"bad variable", []string{"PROVISIONER_HOLDS_TIMEOUT=forever"}, []string{"--receives", "c"}, `provisioner: PROVISIONER_HOLDS_TIMEOUT="forever": want a duration such as 5s, 1m30s or 250ms (see --help)`},
		{"a flag without its value", nil, []string{"--receives"}, "provisioner: flag needs an argument: --receives (see --help)"},
		{"bad switch", nil, []string{"--receives", "c", "--once=maybe"}, `provisioner: invalid boolean value "maybe" for --once: parse error (see --help)`},
		{"stray argument", nil, []string{"--receives", "c", "extra"}, `provisioner: unexpected argument "extra" (see --help)`},
		{"bad url", nil, []string{"--receives", "c", "--database-url", "postgres://admin:hunter2-secret@[::1/x"}, ""},
		{"bad key=value url", nil, []string{"--receives", "c", "--database-url", "host=127.0.0.1 password=hunter2-secret port=none"}, ""},
		{"bad url in a variable", []string{"PROVISIONER_DATABASE_URL=postgres://admin:hunter2%2Fsecret@[::1/x"}, []string{"--receives", "c"}, ""},
		{"listen taken", nil, []string{"--receives", "c", "--listen", taken}, "provisioner: --listen " + taken + ": listen tcp " + taken + ": bind: address already in use"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			code, out := runOnce(t, c.env, c.args...)
			is.Equal(code, 2) // bad usage
			lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
			is.Equal(len(lines), 1) // one line
			if c.says != "" {
				is.Equal(lines[0], c.says) // that says what is wrong
			}
			is.True(!strings.Contains(out, "hunter2")) // a bad URL is shown without its password
		})
	}
}

func TestHelpAndVersion(t *testing.T) {
	is := is.New(t)
	code, out := runOnce(t, nil, "--help")
	is.Equal(code, 0)
	is.True(strings.Contains(out, "--receives PATH"))       // the usage
	is.True(strings.Contains(out, "docs/contributions.md")) // where the file's format is told
	for _, want := range []string{"  --every DURATION  [PROVISIONER_EVERY, default 5s]\n", "  --drop-after DURATION  [PROVISIONER_DROP_AFTER, default 24h]\n",
		"  --on-withdraw retain|drop  [", "  --database-url URL  [", "  --listen ADDR  [", "  --once  [PROVISIONER_ONCE]\n"} {
		is.True(strings.Contains(out, want)) // each flag as an operator types it, what it takes, its variable and default
	}
	is.True(!regexp.MustCompile(`(?m)^\s+-[a-z]`).MatchString(out)) // no Go-style -flag lines
	is.True(!strings.Contains(out, " value\n"))                     // nor Go's "value" placeholder
	is.True(!strings.Contains(out, "seed"))                         // operator words, not the project's

	code, out = runOnce(t, nil, "status", "--help")
	is.Equal(code, 0) // asking for help is not a usage error
	is.True(strings.HasPrefix(out, "Usage: provisioner status [--listen ADDR]\n"))
	code, _ = runOnce(t, nil, "status", "--nope")
	is.Equal(code, 2) // a wrong flag is
	code, out = runOnce(t, nil, "--version")
	is.Equal(code, 0)
	is.True(regexp.MustCompile(`^provisioner 0\.\d+\.\d+ \(commit \S+, go1\.\d+`).MatchString(out)) // the release, the commit, Go
}

func TestVariablesAndFlagPrecedence(t *testing.T) {
	url := pgserver.Shared(t).URL
	cases := []struct {
		name string
		env  func(m *mesh) []string
		args func(m *mesh) []string
	}{
		{"variables alone", func(m *mesh) []string {
			return []string{"PROVISIONER_RECEIVES=" + m.file, "PROVISIONER_RESOURCE=" + m.resource, "PROVISIONER_DATABASE_URL=" + url, "PROVISIONER_ONCE=true"}
		}, func(m *mesh) []string { return nil }},
		{"a flag beats its variable", func(m *mesh) []string {
			return []string{"PROVISIONER_RECEIVES=/nonexistent/c.json", "PROVISIONER_DATABASE_URL=postgres://127.0.0.1:1/x"}
		}, func(m *mesh) []string { return m.args("--once", "--database-url", url) }},
		{"DATABASE_URL", func(m *mesh) []string { return []string{"DATABASE_URL=" + url} },
			func(m *mesh) []string { return m.args("--once") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			m := newMesh(t)
			env := consumer{as: name("env"), password: randomHex(8)}
			m.give(env)
			code, out := runOnce(t, c.env(m), c.args(m)...)
			is.Equal(code, 0)                                                                    // configured as the variables and flags say
			is.Equal(strings.TrimSpace(out), "[provisioner:"+m.resource+"] "+env.as+": created") // the audit line alone
		})
	}
}
