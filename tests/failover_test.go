package tests

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/tests/pgserver"
)

// haURL is base's URL naming each server's host, in their order, with target_session_attrs.
func haURL(t *testing.T, base, attrs string, servers ...*pgserver.Server) string {
	t.Helper()
	u, err := url.Parse(base)
	is.New(t).NoErr(err)
	var hosts []string
	for _, s := range servers {
		hosts = append(hosts, fmt.Sprintf("127.0.0.1:%d", s.Port))
	}
	u.Host = strings.Join(hosts, ",")
	q := u.Query()
	q.Set("target_session_attrs", attrs)
	u.RawQuery = q.Encode()
	return u.String()
}

// caughtUp is whether standby has replayed everything primary has committed. The test servers
// commit asynchronously (synchronous_commit off): a commit's record may still be in the WAL
// buffers, past the write position (pg_current_wal_lsn) and so not yet sent; the insert
// position counts it.
func caughtUp(t *testing.T, primary, standby *pgserver.Server) bool {
	var lsn string
	if err := query(t, primary.URL, "", "SELECT pg_catalog.pg_current_wal_insert_lsn()::text", &lsn); err != nil {
		return false
	}
	var done bool
	err := query(t, standby.URL, "", "SELECT coalesce(pg_catalog.pg_last_wal_replay_lsn() >= '"+lsn+"'::pg_lsn, false)", &done)
	return err == nil && done
}

// A primary and its streaming standby, and a URL naming both with
// target_session_attrs=read-write, as Patroni's users write one. On the healthy primary every
// check works and what drifted is repaired; a provider pointed at the standby alone says so in
// one line and does nothing; the primary stopped (-m immediate) and the standby promoted, the
// provider acts on the new primary, one replica leading, nothing withdrawn or lost, and a
// change made during the failover is right afterwards.
func TestFailoverToAPromotedStandby(t *testing.T) {
	is := is.New(t)
	settings := map[string]string{"log_statement": "all", "log_line_prefix": "%m [%p] {%a} "}
	primary := ownServer(t, "a primary and its streaming standby", settings)
	standby, err := primary.StartStandby(pgserver.Options{Dir: serverDir(t) + "/pg", Settings: settings})
	is.NoErr(err) // a streaming standby of it
	t.Cleanup(func() { _ = standby.Stop() })
	ha := haURL(t, primary.URL, "read-write", primary, standby)

	// (a) The healthy primary: every check works, a dropped extension is made again, a plan
	// reads it.
	m := newMesh(t)
	cs := consumers("ha", 3, "pg_trgm")
	m.give(cs...)
	args := daemonArgs(m, ha, "--verify-every", "300ms")
	ps := []*proc{start(t, nil, args...), start(t, nil, args...)}
	for _, c := range cs {
		eventually(t, c.as+" logs in", func() bool { return c.logsIn(t, primary.URL) })
	}
	eventually(t, "one leader", func() bool { return len(leaders(ps)) == 1 })
	is.NoErr(query(t, primary.URL, cs[0].as, "DROP EXTENSION pg_trgm"))
	eventually(t, "the dropped extension made again", func() bool { return hasExtension(t, primary.URL, cs[0].as, "pg_trgm") })
	for _, p := range ps {
		p.passes(3)
		is.Equal(p.count("could not check"), 0) // every check worked
		is.Equal(p.count("ValidateConnect"), 0)
		is.Equal(p.metric("provisioner_failures_total"), 0.0)
	}
	code, doc, said := planJSON(t, m.args("--database-url", ha)...)
	is.Equal(code, 0) // nothing to do, planned through the URL naming both
	is.Equal(len(doc.Consumers), len(cs))
	is.True(!strings.Contains(said, "read only"))

	// (b) A provider pointed at the standby alone: one line, not ready, nothing attempted.
	sm := newMesh(t)
	waiting := consumers("standby", 1)
	sm.give(waiting...)
	sp := start(t, nil, daemonArgs(sm, standby.URL)...)
	sp.passes(5)
	line := fmt.Sprintf("the server postgres@127.0.0.1:%d is a standby (read only); nothing is created, checked or withdrawn "+
		"until it is promoted or the URL names a primary", standby.Port)
	is.Equal(sp.count(line), 1) // said once
	code, body := sp.get("/readyz")
	is.Equal(code, 503)
	is.True(strings.Contains(body, "is a standby (read only)")) // with the reason
	is.Equal(sp.metric("provisioner_failures_total"), 0.0)      // no failure counted
	is.Equal(sp.metric("provisioner_leader"), 0.0)
	is.Equal(sp.count("failed"), 0)
	for _, s := range statements(t, standby, sm.resource) {
		is.True(s.lease) // nothing asked of the standby but on the lease's session
	}

	// (c) The failover: the standby has all the primary wrote, the primary stops (-m immediate),
	// the file changes while there is no primary, the standby is promoted.
	is.NoErr(query(t, primary.URL, cs[1].as, "CREATE TABLE notes AS SELECT g FROM generate_series(1, 100) g"))
	eventually(t, "the standby caught up", func() bool { return caughtUp(t, primary, standby) })
	most := 0
	leading := func() bool { n := len(leaders(ps)); most = max(most, n); return n == 1 }
	stopped := time.Now()
	primary.StopImmediate()
	added := consumer{as: name("ha"), password: randomHex(8), extensions: []string{"pg_trgm"}}
	cs[2].password = randomHex(8) // rotated
	m.give(append(cs, added)...)
	eventually(t, "no primary is said", func() bool {
		leading()
		return ps[0].count("has no primary the provider can reach") >= 1 || ps[1].count("has no primary the provider can reach") >= 1
	})
	for _, p := range ps {
		p.passes(2)
		leading()
	}
	downFor := time.Since(stopped)
	is.NoErr(standby.Promote())
	promoted := time.Now()
	eventually(t, "the consumer added during the failover logs in", func() bool { leading(); return added.logsIn(t, standby.URL) })
	firstAct := time.Since(promoted)
	eventually(t, "the password rotated during the failover works", func() bool { leading(); return cs[2].logsIn(t, standby.URL) })
	eventually(t, "the provider on the standby's own URL acts", func() bool { return waiting[0].logsIn(t, standby.URL) })
	plainAct := time.Since(promoted)
	t.Logf("failover: primary stopped %s before the promotion; from the promotion, the first consumer made on the new primary "+
		"after %s, the provider on the standby's own URL acting after %s", downFor.Round(time.Millisecond),
		firstAct.Round(time.Millisecond), plainAct.Round(time.Millisecond))

	eventually(t, "one leader", leading)
	is.True(most <= 1) // never two leaders
	for _, c := range append(cs, added) {
		is.True(c.logsIn(t, standby.URL)) // every consumer, on the new primary
		is.True(hasExtension(t, standby.URL, c.as, "pg_trgm"))
	}
	var rows int
	is.NoErr(query(t, standby.URL, cs[1].as, "SELECT count(*) FROM notes", &rows))
	is.Equal(rows, 100) // nothing lost
	for _, p := range append(ps, sp) {
		is.Equal(p.metric("provisioner_withdrawals_total"), 0.0) // nothing withdrawn
		is.Equal(p.metric("provisioner_drops_total"), 0.0)       // nor dropped
	}
	is.Equal(sp.count("the backend can be used again (it was: the server postgres@127.0.0.1:"), 1) // said once it is over
	code, _ = sp.get("/readyz")
	is.Equal(code, 200)
	actors := map[string]bool{}
	for _, s := range acting(statements(t, standby, m.resource)) {
		if !strings.EqualFold(s.text, "show transaction_read_only") { // the URL's test of a session, not an act
			actors[s.replica] = true
		}
	}
	is.Equal(len(actors), 1) // one replica acted on the new primary
}
