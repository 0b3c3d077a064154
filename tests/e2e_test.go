package tests

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/tests/pgserver"
)

// daemonArgs are short intervals so that a test sees a verify interval go by, and a
// withdrawal soon after the file changed; every check looks inside the consumers' databases
// (--inside-check-every no longer than --verify-every) unless a test asks for a budget.
func daemonArgs(m *mesh, url string, more ...string) []string {
	return m.args(append([]string{"--database-url", url, "--every", "200ms", "--verify-every", "1s",
		"--inside-check-every", "1s", "--withdraw-settle", "1s"}, more...)...)
}

func TestConsumerLifecycleRetain(t *testing.T) {
	is := is.New(t)
	url := pgserver.Shared(t).URL
	m := newMesh(t)
	letta := consumer{as: name("letta"), password: "first-" + randomHex(6), extensions: []string{"pg_trgm", "dblink"}}
	m.give(letta)
	// Its database looked inside on a budget: at least every 4 s, where the rest is checked every 1 s.
	p := start(t, nil, daemonArgs(m, url, "--inside-check-every", "4s")...)

	// A consumer added: it logs in with the minted password.
	eventually(t, "letta logs in", func() bool { return letta.logsIn(t, url) })
	is.NoErr(query(t, url, letta.as, "CREATE TABLE notes AS SELECT g FROM generate_series(1, 100) g"))
	eventually(t, "ready", func() bool { code, _ := p.get("/readyz"); return code == 200 })

	// Its password rotated: the old one is refused, the new one accepted.
	old := letta.password
	letta.password = "second-" + randomHex(6)
	m.give(letta)
	eventually(t, "the new password works", func() bool { return letta.logsIn(t, url) })
	is.True(login(t, url, letta.as, old, letta.as) != nil) // the old one is refused
	// The pass that rotated it ends before dblink is dropped: that pass's Create, still under way
	// after the password, would otherwise make dblink again as part of the rotation (on a
	// loaded machine, .ci/run's 17 run), and no drift would be seen or said.
	p.passes(1)

	// An extension dropped behind its back is restored within the interval of its looks inside.
	is.NoErr(query(t, url, letta.as, "DROP EXTENSION dblink"))
	eventually(t, "dblink is back", func() bool {
		var n int
		return query(t, url, letta.as, "SELECT count(*) FROM pg_extension WHERE extname = 'dblink'", &n) == nil && n == 1
	})
	eventually(t, "said so", func() bool { return p.count("the backend no longer holds it; applying again") >= 1 }) // said as the pass settles
	eventually(t, "/status says when its database was last looked inside", func() bool {
		at, _ := p.consumerStatus(t, letta.as)["inside_checked_at"].(string)
		return at != ""
	})

	// The file replaced by garbage: nothing withdrawn, said once.
	m.writeFile(m.file, "{ torn")
	p.passes(5)
	is.True(letta.logsIn(t, url))                          // still there
	is.Equal(p.count("contributions file is not JSON"), 1) // said once over five passes
	is.Equal(p.count("withdrawing"), 0)                    // nothing withdrawn
	eventually(t, "not ready", func() bool { code, _ := p.get("/readyz"); return code == 503 })
	is.Equal(p.metric(`provisioner_contributions_readable`), 0.0) // and the metric says so
	m.give(letta)
	eventually(t, "readable again", func() bool { return p.count("contributions file readable again") == 1 })

	// The consumer removed: no login, the data kept.
	m.give()
	eventually(t, "letta can no longer log in", func() bool { return !letta.logsIn(t, url) })
	var rows int
	is.NoErr(query(t, url, letta.as, "SELECT count(*) FROM notes", &rows))
	is.Equal(rows, 100) // every row kept
	is.True(p.metric(`provisioner_withdrawals_total`) >= 1)

	is.Equal(p.stop(), 0) // SIGTERM: exit 0
	is.True(strings.Contains(p.stderr.String(), "[provisioner:"+m.resource+"] stopped"))
	is.True(!strings.Contains(p.stderr.String(), old))            // no password said
	is.True(!strings.Contains(p.stderr.String(), letta.password)) // at any point
}

func TestConsumerRemovedWithDropLeavesNothing(t *testing.T) {
	is := is.New(t)
	url := pgserver.Shared(t).URL
	m := newMesh(t)
	letta := consumer{as: name("letta"), password: randomHex(8)}
	m.give(letta)
	p := start(t, nil, daemonArgs(m, url, "--on-withdraw", "drop", "--drop-after", "0")...)
	eventually(t, "letta logs in", func() bool { return letta.logsIn(t, url) })
	m.give()
	eventually(t, "role and database gone", func() bool {
		var left int
		err := query(t, url, "", fmt.Sprintf(`SELECT (SELECT count(*) FROM pg_roles WHERE rolname = '%[1]s')
			+ (SELECT count(*) FROM pg_database WHERE datname = '%[1]s')`, letta.as), &left)
		return err == nil && left == 0
	})
	is.Equal(p.stop(), 0)
}

func TestWatchStartsAPassAtOnce(t *testing.T) {
	url := pgserver.Shared(t).URL
	m := newMesh(t)
	m.give()
	// Passes on the timer only once an hour: only the watch can make letta in time.
	start(t, nil, m.args("--database-url", url, "--every", "1h")...)
	letta := consumer{as: name("letta"), password: randomHex(8)}
	m.give(letta)
	eventually(t, "letta made by a pass the file change started", func() bool {
		return letta.logsIn(t, url)
	})
}

func TestSecretWrittenAfterTheFile(t *testing.T) {
	is := is.New(t)
	url := pgserver.Shared(t).URL
	m := newMesh(t)
	letta := consumer{as: name("letta"), password: randomHex(8)}
	m.give(letta)
	is.NoErr(os.Remove(m.secret(letta.as))) // the host has not written it yet
	p := start(t, nil, m.args("--database-url", url, "--every", "1h")...)
	eventually(t, "waiting for the secret", func() bool { return p.count(letta.as+": secret not readable yet") >= 1 })
	m.writeFile(m.secret(letta.as), letta.password+"\n")
	eventually(t, "letta made once the secret is there", func() bool {
		return letta.logsIn(t, url)
	})
}

func TestServerDownAtStartIsNotFatal(t *testing.T) {
	is := is.New(t)
	if !pgserver.Available() {
		t.Skip("stopping and starting a server needs one of our own, and this machine has no server binaries")
	}
	dir := serverDir(t)
	srv, err := pgserver.Start(pgserver.Options{Dir: dir + "/pg"})
	is.NoErr(err)
	url, port := srv.URL, srv.Port
	is.NoErr(srv.Stop()) // the data stays; the server is down

	m := newMesh(t)
	letta := consumer{as: name("letta"), password: randomHex(8)}
	m.give(letta)
	p := start(t, nil, daemonArgs(m, url)...)
	eventually(t, "the failure said", func() bool {
		return p.count(": connect: connection refused; nothing is created, checked or withdrawn") == 1
	})
	eventually(t, "not ready while the server is down, saying why", func() bool {
		code, body := p.get("/readyz")
		return code == 503 && strings.Contains(body, "cannot be reached") // set as the pass ends
	})

	srv, err = pgserver.Start(pgserver.Options{Dir: dir + "/pg", Port: port})
	is.NoErr(err)
	defer srv.Stop()
	eventually(t, "letta made once the server is back", func() bool { return letta.logsIn(t, url) })
	eventually(t, "recovery said", func() bool { return p.count("the backend can be used again (it was: the server ") == 1 })
	eventually(t, "ready", func() bool { code, _ := p.get("/readyz"); return code == 200 })
	is.Equal(p.stop(), 0)
}

func TestJSONLogsCarryTheConsumer(t *testing.T) {
	is := is.New(t)
	url := pgserver.Shared(t).URL
	m := newMesh(t)
	letta := consumer{as: name("letta"), password: randomHex(8), extensions: []string{"no_such_extension"}}
	m.give(letta)
	p := start(t, nil, daemonArgs(m, url, "--log-format", "json")...)
	eventually(t, "the skipped extension said", func() bool { return p.count("no_such_extension") >= 1 })
	is.Equal(p.stop(), 0)
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(p.stderr.String()), "\n") {
		var e map[string]any
		is.NoErr(json.Unmarshal([]byte(line), &e)) // every line is JSON
		if strings.Contains(e["msg"].(string), "no_such_extension") {
			is.Equal(e["consumer"], letta.as) // the consumer as a field
			is.Equal(e["resource"], m.resource)
			is.Equal(e["level"], "WARN")
			found = true
		}
	}
	is.True(found)
}

func TestHealthAndMetrics(t *testing.T) {
	is := is.New(t)
	url := pgserver.Shared(t).URL
	m := newMesh(t)
	letta := consumer{as: name("letta"), password: randomHex(8)}
	m.give(letta, consumer{as: name("waiting"), password: "x"})
	is.NoErr(os.Remove(m.secret(letta.as)))
	p := start(t, nil, daemonArgs(m, url)...)
	code, body := p.get("/healthz")
	for code == 0 { // the listener comes up with the process
		code, body = p.get("/healthz")
	}
	is.Equal(code, 200)
	is.Equal(body, "ok\n")
	eventually(t, "one waiting, one applied", func() bool {
		return p.metric(`provisioner_consumers{state="waiting_for_secret"}`) == 1 &&
			p.metric(`provisioner_consumers{state="applied"}`) == 1
	})
	is.Equal(p.metric(`provisioner_creates_total`), 1.0)
	is.True(p.metric(`provisioner_pass_duration_seconds_count`) >= 1)
	is.Equal(p.metric(`provisioner_backend_reachable`), 1.0)
	is.Equal(p.metric(`provisioner_contributions_readable`), 1.0)
}

func TestAProviderThatMayNeitherCreateRolesNorDatabasesIsToldSo(t *testing.T) {
	is := is.New(t)
	srv := pgserver.Shared(t)
	weak := name("weak")
	is.NoErr(query(t, srv.URL, "", "CREATE ROLE "+weak+" LOGIN CREATEDB PASSWORD 'weak-pw'"))
	u, err := url.Parse(srv.URL)
	is.NoErr(err)
	u.User = url.UserPassword(weak, "weak-pw")
	m := newMesh(t)
	m.give(consumer{as: name("c"), password: randomHex(8)})
	code, out := runOnce(t, nil, m.args("--once", "--database-url", u.String())...)
	is.Equal(code, 1)
	is.True(strings.HasPrefix(out, "[provisioner:"+m.resource+"] the server "+weak+"@127.0.0.1:")) // the first line says it
	is.True(strings.Contains(out, "the provider's role "+weak+" is not a superuser and lacks CREATEROLE"))
	is.True(!strings.Contains(out, "permission denied")) // not a consumer's failure

	p := start(t, nil, daemonArgs(m, u.String())...)
	eventually(t, "the warning", func() bool { return p.count("lacks CREATEROLE") == 1 })
	p.passes(3)
	is.Equal(p.count("lacks CREATEROLE"), 1) // said once
	code, body := p.get("/readyz")
	is.Equal(code, 503)
	is.True(strings.Contains(body, "lacks CREATEROLE")) // the real reason
}

// A provider whose role may create roles and databases and is not a superuser, as the admin
// of a managed server is, runs in delegated mode: letta gets its login, database and trusted
// extension, its password is checked by logging in, and the mode is named.
func TestAProviderWithoutASuperuserRunsDelegated(t *testing.T) {
	is := is.New(t)
	srv := pgserver.Shared(t)
	m := newMesh(t)
	letta := consumer{as: name("letta"), password: randomHex(8), extensions: []string{"pg_trgm", "dblink"}}
	m.give(letta)
	p := start(t, nil, daemonArgs(m, delegatedURL(t, srv.URL), "--login-check-every", "3s")...)
	eventually(t, "letta logs in", func() bool { return letta.logsIn(t, srv.URL) })
	eventually(t, "letta has pg_trgm", func() bool {
		var n int
		return query(t, srv.URL, letta.as, "SELECT count(*) FROM pg_extension WHERE extname = 'pg_trgm'", &n) == nil && n == 1
	})
	eventually(t, "dblink refused, said once", func() bool {
		return p.count(letta.as+": extension dblink is refused by the server") == 1
	})
	is.Equal(p.count("delegated mode"), 1)
	eventually(t, "the mode a metric", func() bool { return p.metric(`provisioner_mode{role="delegated"}`) == 1 })
	var status struct{ Mode string }
	is.NoErr(p.status(&status))
	is.Equal(status.Mode, "delegated")
	is.NoErr(query(t, srv.URL, "", "ALTER ROLE "+letta.as+" PASSWORD 'behind-its-back'"))
	eventually(t, "the password drift found by logging in, and repaired", func() bool {
		return p.count(letta.as+": what drifted: password") == 1 && letta.logsIn(t, srv.URL)
	})
	p.passes(3)
	is.Equal(p.count("extension dblink is refused"), 1) // still said once
}
