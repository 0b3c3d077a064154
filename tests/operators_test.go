package tests

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/tests/pgserver"
)

// TestAServerProblemIsOneLine points a provisioner with 100 consumers at a server it cannot
// use, three ways, and counts what it says over several passes.
func TestAServerProblemIsOneLine(t *testing.T) {
	srv := pgserver.Shared(t)
	wrong, err := url.Parse(srv.URL)
	is.New(t).NoErr(err)
	wrong.User = url.UserPassword("postgres", "not-the-password")
	for _, c := range []struct {
		name, url, says string
	}{
		{"wrong password", wrong.String(), "refused the provider's password (28P01): check the password of the connection URL"},
		{"server down", "postgres://postgres:x@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2", "@127.0.0.1:1 cannot be reached: dial tcp 127.0.0.1:1: connect: connection refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			m := newMesh(t)
			var cs []consumer
			for range 100 {
				cs = append(cs, consumer{as: name("many"), password: randomHex(8)})
			}
			m.give(cs...)
			p := start(t, nil, daemonArgs(m, c.url)...)
			eventually(t, "said", func() bool { return p.count(c.says) == 1 })
			p.passes(5)
			is.Equal(p.count(c.says), 1)                                           // once over five passes, for 100 consumers
			is.Equal(strings.Count(strings.TrimSpace(p.stderr.String()), "\n"), 1) // and nothing else than the starting line
			code, body := p.get("/readyz")
			is.Equal(code, 503)
			is.True(strings.Contains(body, c.says)) // the real reason
			is.Equal(p.metric(`provisioner_consumers{state="unchecked"}`), 100.0)
			is.Equal(p.metric(`provisioner_consumers{state="failing"}`), 0.0) // unchecked, not failed

			code, out := runOnce(t, nil, m.args("--once", "--database-url", c.url)...)
			is.Equal(code, 1)
			is.True(strings.Contains(out, c.says))
			is.True(!strings.Contains(out, "will retry") && !strings.Contains(out, "until this is resolved")) // --once retries nothing
			is.Equal(strings.Count(out, "\n"), 1)
		})
	}
}

func TestTheStartingLineNamesTheServer(t *testing.T) {
	is := is.New(t)
	url := pgserver.Shared(t).URL
	m := newMesh(t)
	m.give()
	p := start(t, nil, daemonArgs(m, url)...)
	eventually(t, "started", func() bool { return p.count("starting: ") == 1 })
	is.True(strings.Contains(p.stderr.String(), "starting: postgres@127.0.0.1:")) // user@host:port, no password
}

func TestStatusListsEveryConsumer(t *testing.T) {
	is := is.New(t)
	url := pgserver.Shared(t).URL
	m := newMesh(t)
	ok := consumer{as: name("ok"), password: randomHex(8)}
	waiting := consumer{as: name("waiting"), password: randomHex(8)}
	m.give(ok, waiting)
	m.remove(m.secret(waiting.as))
	p := start(t, nil, daemonArgs(m, url)...)
	eventually(t, "ok logs in", func() bool { return ok.logsIn(t, url) })
	p.passes(2)
	code, body := p.get("/status")
	is.Equal(code, 200)
	var doc struct {
		Resource string `json:"resource"`
		Role     string `json:"role"`
		Ready    bool   `json:"ready"`
		LastPass struct {
			TookSeconds any `json:"took_seconds"`
		} `json:"last_pass"`
		Consumers []struct {
			As        string    `json:"as"`
			State     string    `json:"state"`
			Since     time.Time `json:"since"`
			CheckedAt time.Time `json:"checked_at"`
			NextCheck time.Time `json:"next_check"`
			LastError string    `json:"last_error"`
		} `json:"consumers"`
	}
	is.NoErr(json.Unmarshal([]byte(body), &doc))
	is.Equal(doc.Resource, m.resource)
	took, isNumber := doc.LastPass.TookSeconds.(float64)
	is.True(isNumber && took > 0 && took < 60) // a duration in seconds, a JSON number, not a Go duration string
	is.Equal(len(doc.Consumers), 2)            // every listed consumer, in the file's order
	is.Equal(doc.Consumers[0].As, ok.as)
	is.Equal(doc.Consumers[0].State, "applied")
	is.True(!doc.Consumers[0].Since.IsZero() && doc.Consumers[0].NextCheck.After(doc.Consumers[0].Since))
	is.Equal(doc.Consumers[1].State, "waiting_for_secret")

	out, err := exec.Command(binary, "status", "--listen", p.listen).CombinedOutput()
	is.NoErr(err)
	is.True(strings.Contains(string(out), "CONSUMER")) // the table
	is.True(strings.Contains(string(out), ok.as+" "))
	is.True(strings.Contains(string(out), "waiting_for_secret"))
}

// TestStatusKeepsAWithdrawnConsumerWithItsDropDate: a consumer the file no longer lists stays in
// /status and in provisioner status, withdrawn, with when its data will be dropped.
func TestStatusKeepsAWithdrawnConsumerWithItsDropDate(t *testing.T) {
	is := is.New(t)
	url := pgserver.Shared(t).URL
	m := newMesh(t)
	stay, gone := consumer{as: name("stay"), password: randomHex(8)}, consumer{as: name("gone"), password: randomHex(8)}
	m.give(stay, gone)
	p := start(t, nil, daemonArgs(m, url, "--on-withdraw", "drop", "--drop-after", "1h")...)
	eventually(t, "both log in", func() bool { return stay.logsIn(t, url) && gone.logsIn(t, url) })
	m.give(stay)
	eventually(t, "gone can no longer log in", func() bool { return !gone.logsIn(t, url) })
	var doc struct {
		Consumers []struct{ As string }
		Leaving   []struct {
			As     string
			State  string
			Since  time.Time
			DropAt time.Time `json:"drop_at"`
		}
	}
	eventually(t, "gone shown withdrawn", func() bool {
		return p.status(&doc) == nil && len(doc.Leaving) == 1 && doc.Leaving[0].State == "withdrawn"
	})
	left := doc.Leaving[0]
	is.Equal(left.As, gone.as)
	is.Equal(len(doc.Consumers), 1) // the listed one, as before
	is.Equal(doc.Consumers[0].As, stay.as)
	is.True(!left.Since.IsZero())                                                                       // when it was withdrawn
	is.True(!left.DropAt.Before(left.Since.Add(time.Hour)))                                             // dropped no sooner than --drop-after after that
	is.True(left.DropAt.After(time.Now()) && left.DropAt.Before(time.Now().Add(time.Hour+time.Minute))) // and not yet

	out, err := exec.Command(binary, "status", "--listen", p.listen).Output()
	is.NoErr(err)                                        // ready: exit 0
	is.True(strings.Contains(string(out), "\nLEAVING ")) // the second table
	row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(gone.as) + `\s+withdrawn\s+\S+ ago\s+-\s+in [0-9hms]+\s+-$`)
	is.True(row.Match(out)) // withdrawn, since when, no withdrawal due, the drop due, no error
}

// TestStatusExitsOneWhileNotReady: a script that runs `provisioner status` learns from its exit
// code that the daemon is not ready, and the table still says why.
func TestStatusExitsOneWhileNotReady(t *testing.T) {
	is := is.New(t)
	m := newMesh(t)
	m.give(consumer{as: name("nowhere"), password: randomHex(8)})
	p := start(t, nil, daemonArgs(m, "postgres://postgres@"+freeAddr(t)+"/postgres?connect_timeout=2")...) // nothing listens there
	eventually(t, "not ready", func() bool { code, _ := p.get("/readyz"); return code == 503 })
	p.passes(1)
	cmd := exec.Command(binary, "status", "--listen", p.listen)
	out, err := cmd.Output()
	var exit *exec.ExitError
	is.True(errors.As(err, &exit))
	is.Equal(exit.ExitCode(), 1)                            // not ready
	is.True(strings.Contains(string(out), ", not ready: ")) // the table printed, saying why
	is.True(strings.Contains(string(out), "CONSUMER"))
}

func TestDriftIsSaidAndShown(t *testing.T) {
	is := is.New(t)
	url := pgserver.Shared(t).URL
	m := newMesh(t)
	c := consumer{as: name("drift"), password: randomHex(8)}
	m.give(c)
	p := start(t, nil, daemonArgs(m, url)...)
	eventually(t, "logs in", func() bool { return c.logsIn(t, url) })
	is.NoErr(query(t, url, "", "ALTER ROLE "+c.as+" CONNECTION LIMIT 1"))
	eventually(t, "the drift said", func() bool { return p.count(c.as+": what drifted: ") == 1 })
	is.True(p.count(c.as+": the backend no longer holds it; applying again") == 1) // the spec's line first, word for word
	is.True(p.count("connection limit") >= 1)
	var limit int
	eventually(t, "repaired", func() bool {
		return query(t, url, "", "SELECT rolconnlimit FROM pg_roles WHERE rolname = '"+c.as+"'", &limit) == nil && limit == -1
	})
}

func TestSIGHUPStartsAPass(t *testing.T) {
	is := is.New(t)
	url := pgserver.Shared(t).URL
	m := newMesh(t)
	m.give()
	p := start(t, nil, m.args("--database-url", url, "--every", "1h")...)
	p.passes(0)
	before := p.metric(`provisioner_passes_total`)
	is.NoErr(p.g.Signal(syscall.SIGHUP))
	eventually(t, "a pass", func() bool { return p.metric(`provisioner_passes_total`) > before })
	is.Equal(p.count("SIGHUP: a pass now"), 1) // said
	is.Equal(p.stop(), 0)                      // still running, and stops as ever
}

func TestSystemdIsNotified(t *testing.T) {
	is := is.New(t)
	url := pgserver.Shared(t).URL
	socket := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: socket, Net: "unixgram"})
	is.NoErr(err)
	defer conn.Close()
	said := make(chan string, 100)
	go func() {
		buf := make([]byte, 256)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				close(said)
				return
			}
			said <- string(buf[:n])
		}
	}()
	next := func() string {
		select {
		case s := <-said:
			return s
		case <-time.After(30 * time.Second):
			t.Fatal("nothing said to systemd")
			return ""
		}
	}
	m := newMesh(t)
	m.give()
	p := start(t, []string{"NOTIFY_SOCKET=" + socket, "WATCHDOG_USEC=200000"}, daemonArgs(m, url)...)
	got := map[string]bool{}
	for !got["READY=1"] || !got["WATCHDOG=1"] {
		got[next()] = true // ready after the first pass, and the watchdog fed
	}
	is.NoErr(p.g.Signal(syscall.SIGTERM))
	for s := next(); s != "STOPPING=1"; s = next() {
		is.Equal(s, "WATCHDOG=1") // until it says it stops
	}
}

func TestBuildInfoIsAMetric(t *testing.T) {
	is := is.New(t)
	m := newMesh(t)
	m.give()
	p := start(t, nil, m.args("--database-url", pgserver.Shared(t).URL)...)
	eventually(t, "metrics", func() bool { _, body := p.get("/metrics"); return strings.Contains(body, "provisioner_build_info{") })
	_, body := p.get("/metrics")
	is.True(strings.Contains(body, fmt.Sprintf(`goversion="go1.`))) // with the Go version
}
