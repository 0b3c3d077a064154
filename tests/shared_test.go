package tests

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/tests/pgserver"
)

// The tests of issue 32: running a shared server. A long pass shows its progress; each
// consumer's settings are set and held; each consumer's usage is read.

// slowLink is a TCP link to target on loopback that holds every chunk the server sends for
// delay before passing it on, as a server far away does: every round trip of the provider's
// takes delay longer. It answers the address to reach target through; it is closed with the
// test.
func slowLink(t *testing.T, target string, delay time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	is.New(t).NoErr(err)
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				_ = client.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, client, server)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(server, client); _ = server.Close() }()
			go func() {
				defer wg.Done()
				defer client.Close()
				buf := make([]byte, 32<<10)
				for {
					n, err := server.Read(buf)
					if n > 0 {
						time.Sleep(delay)
						if _, werr := client.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// through is url with its host and port those of addr.
func through(t *testing.T, raw, addr string) string {
	t.Helper()
	u, err := url.Parse(raw)
	is.New(t).NoErr(err)
	u.Host = addr
	return u.String()
}

// statusOf is the provisioner's /status, decoded.
func (p *proc) statusOf() map[string]any {
	var doc map[string]any
	_ = p.status(&doc)
	return doc
}

// consumerStatus is what /status says of the listed consumer as.
func (p *proc) consumerStatus(t *testing.T, as string) map[string]any {
	t.Helper()
	list, _ := p.statusOf()["consumers"].([]any)
	for _, c := range list {
		if c, ok := c.(map[string]any); ok && c["as"] == as {
			return c
		}
	}
	t.Fatalf("/status lists no %s: %v", as, list)
	return nil
}

func TestALongPassShowsItsProgress(t *testing.T) {
	is := is.New(t)
	srv := pgserver.Shared(t)
	u, err := url.Parse(srv.URL)
	is.NoErr(err)
	// Every round trip 15 ms longer, as to a server across a region: a create is a dozen of
	// them and CREATE DATABASE, so 200 creates two at a time take a minute or so.
	slow := through(t, srv.URL, slowLink(t, u.Host, 15*time.Millisecond))
	m := newMesh(t)
	cs := consumers("prog", 200)
	m.give(cs...)
	p := start(t, nil, m.args("--database-url", slow, "--parallel", "2", "--progress-every", "2s", "--every", "1s")...)

	// While the first pass runs: /status says where it stands, and the counters move.
	var text string
	var listed []any
	eventually(t, "/status says the pass is creating, part way, and the counter moved", func() bool {
		doc := p.statusOf()
		pass, _ := doc["pass"].(map[string]any)
		if pass == nil || pass["doing"] != "creating" || pass["of"] != 200.0 {
			return false
		}
		listed, _ = doc["consumers"].([]any)
		done, _ := pass["done"].(float64)
		text, _ = pass["text"].(string)
		created := p.metric("provisioner_creates_total")
		return done >= 20 && done < 180 && created >= 1 && created < 200 && pass["left_seconds"] != nil
	})
	is.True(regexp.MustCompile(`^creating: \d+ of 200, about \d+ (s|min) left$`).MatchString(text)) // as an operator reads it
	// The consumers listed as the first pass settles them: those made applied, the rest unchecked.
	is.Equal(len(listed), 200)
	states := map[string]int{}
	for _, c := range listed {
		states[c.(map[string]any)["state"].(string)]++
	}
	is.True(states["applied"] >= 1 && states["unchecked"] >= 1 && states["applied"]+states["unchecked"] == 200)
	out, _ := exec.Command(binary, "status", "--listen", p.listen).CombinedOutput()
	is.True(regexp.MustCompile(`(?m)^pass under way for \S+: creating: \d+ of 200`).Match(out)) // provisioner status says it too
	eventually(t, "a line says where the pass stands, before it ends", func() bool {
		return regexp.MustCompile(`pass under way for \S+: creating: \d+ of 200`).MatchString(p.stderr.String()) &&
			p.metric("provisioner_creates_total") < 200
	})

	// It ends: every consumer created, counted once, the pass no longer shown.
	eventually(t, "every consumer created", func() bool { return p.metric("provisioner_creates_total") == 200 })
	p.passes(1)
	is.Equal(p.metric("provisioner_creates_total"), 200.0) // counted once: as calls returned, not again as the pass settled
	is.Equal(p.statusOf()["pass"], nil)
	// The pass's own lines keep the file's order.
	said := p.stderr.String()
	at := -1
	for _, c := range cs {
		i := strings.Index(said, "] "+c.as+": created")
		is.True(i > at) // in the file's order
		at = i
	}
}

// setconfig is the role's settings in its database.
func setconfig(t *testing.T, url, role string) []string {
	t.Helper()
	var out []string
	_ = query(t, url, "", fmt.Sprintf(`SELECT coalesce((SELECT s.setconfig FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole
JOIN pg_database d ON d.oid = s.setdatabase WHERE r.rolname = '%s' AND d.datname = '%s'), '{}')`, role, role), &out)
	return out
}

func TestSettingsAreSetHeldAndRefusedWhereUnsafe(t *testing.T) {
	is := is.New(t)
	url := pgserver.Shared(t).URL
	m := newMesh(t)
	bounded := consumer{as: name("bounded"), password: randomHex(8)}
	unsafe := consumer{as: name("unsafe"), password: randomHex(8)}
	m.giveEntries([]consumer{bounded, unsafe},
		m.entry(bounded, []string{}, map[string]any{"settings": map[string]any{"statement_timeout": "30s", "idle_in_transaction_session_timeout": "5min"}}),
		m.entry(unsafe, []string{}, map[string]any{"settings": map[string]any{"session_preload_libraries": "auto_explain"}}))
	p := start(t, nil, daemonArgs(m, url)...)

	eventually(t, "the settings are the role's in its database", func() bool {
		have := setconfig(t, url, bounded.as)
		return slices.Contains(have, "statement_timeout=30s") && slices.Contains(have, "idle_in_transaction_session_timeout=5min")
	})
	// A session of the consumer has them.
	conn := mustConnect(t, url, bounded.as, bounded.password, bounded.as)
	var timeout string
	is.NoErr(conn.QueryRow(ctx, "SHOW statement_timeout").Scan(&timeout))
	is.Equal(timeout, "30s")

	// The consumer lifts one for itself: put back within a verify interval, the drift named.
	_, err := conn.Exec(ctx, "ALTER ROLE "+bounded.as+" IN DATABASE "+bounded.as+" SET statement_timeout = 0")
	is.NoErr(err)
	eventually(t, "the consumer's change repaired", func() bool {
		return slices.Contains(setconfig(t, url, bounded.as), "statement_timeout=30s") &&
			strings.Contains(p.stderr.String(), bounded.as+": what drifted: setting statement_timeout")
	})
	// An operator resets another: put back too.
	is.NoErr(query(t, url, "", "ALTER ROLE "+bounded.as+" IN DATABASE "+bounded.as+" RESET idle_in_transaction_session_timeout"))
	eventually(t, "the operator's change repaired", func() bool {
		return slices.Contains(setconfig(t, url, bounded.as), "idle_in_transaction_session_timeout=5min")
	})

	// The unsafe one is refused, with the reason, in its line and /status; nothing of it made.
	eventually(t, "the unsafe setting refused with the reason", func() bool {
		return strings.Contains(p.stderr.String(), unsafe.as+": refused: ") &&
			strings.Contains(p.stderr.String(), "setting session_preload_libraries: never set for a consumer")
	})
	_, body := p.get("/status")
	is.True(strings.Contains(body, "setting session_preload_libraries: never set for a consumer")) // its last error
	is.True(!unsafe.logsIn(t, url))                                                                // nothing made for it
	is.True(bounded.logsIn(t, url))                                                                // the other unaffected
}

func TestUsageShowsEachConsumersSizeAndConnections(t *testing.T) {
	is := is.New(t)
	url := pgserver.Shared(t).URL
	m := newMesh(t)
	big := consumer{as: name("big"), password: randomHex(8)}
	small := consumer{as: name("small"), password: randomHex(8)}
	m.give(big, small)
	p := start(t, nil, daemonArgs(m, url, "--usage-every", "1s", "--metrics-per-consumer")...)
	eventually(t, "both log in", func() bool { return big.logsIn(t, url) && small.logsIn(t, url) })

	// A table of known size in big's database, and a session of big's held open.
	conn := mustConnect(t, url, big.as, big.password, big.as)
	_, err := conn.Exec(ctx, "CREATE TABLE filler AS SELECT repeat('x', 1000) AS pad FROM generate_series(1, 32768)")
	is.NoErr(err)
	var table, empty int64
	is.NoErr(conn.QueryRow(ctx, "SELECT pg_total_relation_size('filler')").Scan(&table))
	is.True(table >= 32<<20) // 32,768 rows of 1 kB
	is.NoErr(query(t, url, "", "SELECT pg_database_size('"+small.as+"')", &empty))
	// The writer's session ends, which reports its row counts (14 reports them at a session's
	// next transaction or its end, and the read sizes what they show written); another is held.
	is.NoErr(conn.Close(ctx))
	mustConnect(t, url, big.as, big.password, big.as)

	type usage struct {
		DatabaseBytes float64 `json:"database_bytes"`
		Connections   float64 `json:"connections"`
	}
	var by map[string]usage
	eventually(t, "/status shows big's table and its session", func() bool {
		var doc struct {
			Usage map[string]usage `json:"usage"`
		}
		if p.status(&doc) != nil {
			return false
		}
		by = doc.Usage
		return by[big.as].DatabaseBytes >= float64(table) && by[big.as].Connections >= 1
	})
	is.True(by[big.as].DatabaseBytes < float64(empty+table)+8<<20)                               // plausible: an empty database and the table, give or take
	is.True(by[small.as].DatabaseBytes > 0 && by[small.as].DatabaseBytes < float64(empty)+4<<20) // the other as empty as it was
	_, metrics := p.get("/metrics")
	series := func(name string) float64 { // labels sort: consumer before resource
		m := regexp.MustCompile(`(?m)^` + name + `\{consumer="` + big.as + `",resource="[^"]*"\} (\S+)$`).FindStringSubmatch(metrics)
		if m == nil {
			return -1
		}
		var v float64
		_, _ = fmt.Sscan(m[1], &v)
		return v
	}
	is.True(series("provisioner_consumer_database_bytes") >= float64(table)) // --metrics-per-consumer: its series
	is.True(series("provisioner_consumer_connections") >= 1)
	out, _ := exec.Command(binary, "status", "--listen", p.listen).CombinedOutput()
	is.True(regexp.MustCompile(`(?m)^CONSUMER .* SIZE +CONNS `).Match(out))                              // provisioner status shows it
	is.True(regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(big.as) + ` .* [0-9.]+ MB +[1-9]`).Match(out)) // big's row
}

func TestUsageIsNoSeriesPerConsumerUnlessAskedFor(t *testing.T) {
	is := is.New(t)
	url := pgserver.Shared(t).URL
	m := newMesh(t)
	c := consumer{as: name("plain"), password: randomHex(8)}
	m.give(c)
	p := start(t, nil, daemonArgs(m, url, "--usage-every", "1s")...)
	eventually(t, "its usage read", func() bool {
		_, body := p.get("/status")
		return strings.Contains(body, `"database_bytes"`)
	})
	_, body := p.get("/metrics")
	is.True(!strings.Contains(body, "provisioner_consumer_database_bytes")) // no series per consumer
}

// Issue 39, case 2: refusals are said as refusals, in the line, /status and the plan alike: a
// value the server rejects (said once, not retried on a short back-off), and a setting an
// operator took off --allow-settings since the consumer was made (at the restart's check:
// never "could not check the backend", never unchecked), what was made for it left as it is.
func TestRefusalsAreSaidAsRefusalsInTheLineStatusAndPlan(t *testing.T) {
	is := is.New(t)
	url := pgserver.Shared(t).URL
	m := newMesh(t)
	rejected := consumer{as: name("rejected"), password: randomHex(8)}
	held := consumer{as: name("held"), password: randomHex(8)}
	m.giveEntries([]consumer{rejected, held},
		m.entry(rejected, []string{}, map[string]any{"settings": map[string]any{"statement_timeout": "soon"}}),
		m.entry(held, []string{}, map[string]any{"settings": map[string]any{"work_mem": "8MB"}}))
	p := start(t, nil, daemonArgs(m, url)...)
	eventually(t, "held's setting made", func() bool { return slices.Contains(setconfig(t, url, held.as), "work_mem=8MB") })
	line := rejected.as + `: refused: settings of ` + rejected.as + ` in ` + rejected.as + `: setting statement_timeout: invalid value for parameter "statement_timeout": "soon"`
	eventually(t, "the rejected value refused", func() bool {
		return p.count(line) == 1 && p.metric(`provisioner_consumers{state="refused"}`) == 1
	})
	is.Equal(p.consumerStatus(t, rejected.as)["state"], "refused")
	p.passes(10)                                // 2 s of passes: not tried again, nor said again
	is.Equal(p.count("] "+rejected.as+": "), 1) // one line of it: "refused", with when it is tried again
	is.True(strings.Contains(p.stderr.String(), line+"; tried again in 1h0m0s, or at once when its entry changes or on SIGHUP"))
	is.Equal(p.stop(), 0)

	// work_mem taken off the allowed list: held's check at the next start is refused.
	allowed := []string{"--allow-settings", "statement_timeout"}
	p = start(t, nil, daemonArgs(m, url, allowed...)...)
	refusal := held.as + ": refused: "
	eventually(t, "held's check refused", func() bool {
		return p.count(refusal) == 1 && p.metric(`provisioner_consumers{state="refused"}`) == 2
	})
	is.Equal(p.count("could not check the backend"), 0)
	is.True(strings.Contains(p.stderr.String(), "setting work_mem is not allowed on this server (--allow-settings); what was made for it is left as it is"))
	is.True(slices.Contains(setconfig(t, url, held.as), "work_mem=8MB")) // left as it is
	is.True(held.logsIn(t, url))
	st := p.consumerStatus(t, held.as)
	is.Equal(st["state"], "refused")
	why := st["last_error"].(string)
	is.True(strings.Contains(why, "setting work_mem is not allowed on this server (--allow-settings)"))

	// The plan says the same, in the same words, and exits 3.
	code, doc, _ := planJSON(t, m.args(append([]string{"--database-url", url}, allowed...)...)...)
	is.Equal(code, 3)
	is.Equal(doc.of(t, held.as).Act, "refuse")
	is.Equal(doc.of(t, held.as).Why, []string{why})
	is.Equal(doc.of(t, rejected.as).Act, "refuse") // the rejected value foreseen, in the line's words
	is.Equal(doc.of(t, rejected.as).Why, []string{strings.TrimPrefix(line, rejected.as+": refused: ")})
	exists, _ := roleLeft(t, url, rejected.as)
	is.True(!exists) // refused before anything was made for it
}
