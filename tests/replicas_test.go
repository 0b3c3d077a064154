package tests

import (
	"bufio"
	"bytes"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/tests/pgserver"
)

// replicaServer is a server of the test's own that logs every statement with its time (to the
// millisecond) and the application_name of its session: which replica said it.
func replicaServer(t *testing.T) *pgserver.Server {
	t.Helper()
	return ownServer(t, "reading who said what in a server's log", map[string]string{
		"log_statement": "all", "log_line_prefix": "%m [%p] {%a} "})
}

// statement is one statement the server logged.
type statement struct {
	at      time.Time
	replica string // the application_name, without /lease
	lease   bool   // said on the lease's session
	text    string
}

var logLine = regexp.MustCompile(`^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) \w+ \[\d+\] \{([^}]*)\} LOG:  (?:statement|execute [^:]*): (.*)$`)

// statements are what the provider's sessions of resource logged, in order.
func statements(t *testing.T, srv *pgserver.Server, resource string) []statement {
	t.Helper()
	raw, err := srv.Log()
	is.New(t).NoErr(err)
	var out []statement
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := logLine.FindStringSubmatch(sc.Text())
		if m == nil || !strings.HasPrefix(m[2], "novox-provisioner/"+resource+"/") {
			continue
		}
		at, err := time.Parse("2006-01-02 15:04:05.000", m[1])
		is.New(t).NoErr(err)
		replica, lease := strings.CutSuffix(m[2], "/lease")
		out = append(out, statement{at: at, replica: replica, lease: lease, text: m[3]})
	}
	return out
}

// acting are the statements that act on consumers: not the lease's, nor the readiness ping.
func acting(all []statement) []statement {
	var out []statement
	for _, s := range all {
		if !s.lease && !strings.Contains(s.text, "-- ping") {
			out = append(out, s)
		}
	}
	return out
}

// leaders are the replicas whose /metrics say they act.
func leaders(ps []*proc) []*proc {
	var out []*proc
	for _, p := range ps {
		if p.metric(`provisioner_leader`) == 1 {
			out = append(out, p)
		}
	}
	return out
}

func TestThreeReplicasOneActs(t *testing.T) {
	is := is.New(t)
	srv := replicaServer(t)
	m := newMesh(t)
	cs := []consumer{{as: name("ha"), password: randomHex(8)}, {as: name("ha"), password: randomHex(8)}}
	m.give(cs...)
	var ps []*proc
	for range 3 {
		ps = append(ps, start(t, nil, daemonArgs(m, srv.URL)...))
	}
	eventually(t, "both consumers log in", func() bool { return cs[0].logsIn(t, srv.URL) && cs[1].logsIn(t, srv.URL) })
	for _, p := range ps {
		p.passes(3)
	}
	is.Equal(len(leaders(ps)), 1) // exactly one acts
	replicas := map[string]bool{}
	for _, s := range acting(statements(t, srv, m.resource)) {
		replicas[s.replica] = true
	}
	is.Equal(len(replicas), 1) // and the server saw the consumers' statements from one replica only
	for _, p := range ps {
		if p.metric(`provisioner_leader`) == 0 {
			is.Equal(p.count("standing by: another replica holds the lease of "+m.resource), 1) // said once
			code, _ := p.get("/readyz")
			is.Equal(code, 200) // a standby that reaches the server is ready
			_, body := p.get("/status")
			is.True(strings.Contains(body, `"role": "standby"`))
		}
	}

	// The leader killed: another acts, and converges a consumer added meanwhile.
	leader := leaders(ps)[0]
	killed := time.Now()
	is.NoErr(leader.g.Signal(syscall.SIGKILL))
	<-leader.g.Exited()
	added := consumer{as: name("ha"), password: randomHex(8)}
	cs = append(cs, added)
	m.give(cs...)
	rest := []*proc{}
	for _, p := range ps {
		if p != leader {
			rest = append(rest, p)
		}
	}
	eventually(t, "the added consumer made by another", func() bool { return added.logsIn(t, srv.URL) })
	t.Logf("take-over after kill -9, to the added consumer logging in: %s", time.Since(killed).Round(time.Millisecond))
	eventually(t, "one leader", func() bool { return len(leaders(rest)) == 1 })

	// The leader's lease session ended by an operator: it stops acting, and another takes over.
	leader = leaders(rest)[0]
	var ended bool
	terminated := time.Now()
	is.NoErr(query(t, srv.URL, "", `SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity a
		JOIN pg_locks l ON l.pid = a.pid AND l.locktype = 'advisory' AND l.granted
		WHERE a.application_name LIKE 'novox-provisioner/`+m.resource+`/%/lease'`, &ended))
	is.True(ended)
	eventually(t, "it says it lost the lease", func() bool { return leader.count("lost the lease of "+m.resource) == 1 })
	eventually(t, "another acts", func() bool { l := leaders(rest); return len(l) == 1 && l[0] != leader })
	t.Logf("take-over after the lease's session was terminated, to another leading: %s", time.Since(terminated).Round(time.Millisecond))

	// The server restarted: exactly one leader afterwards.
	port := srv.Port
	is.NoErr(srv.Stop())
	srv2, err := pgserver.Start(pgserver.Options{Dir: srv.Dir, Port: port, Settings: map[string]string{"log_statement": "all"}})
	is.NoErr(err)
	defer srv2.Stop()
	restarted := time.Now()
	eventually(t, "one leader after the restart", func() bool { return len(leaders(rest)) == 1 })
	t.Logf("a leader again after the server was up again: %s", time.Since(restarted).Round(time.Millisecond))
	for _, p := range rest {
		p.passes(3)
	}
	is.Equal(len(leaders(rest)), 1)
	is.True(added.logsIn(t, srv2.URL))
}

// TestNeverTwoActAtOnce runs two replicas and, for a while, kills whichever leads and starts it
// again; then it reads the server's log: between a replica's look at its lease and its last
// statement before the next, no other replica said anything that acts.
func TestNeverTwoActAtOnce(t *testing.T) {
	is := is.New(t)
	srv := replicaServer(t)
	m := newMesh(t)
	cs := consumers("churn", 6, "pg_trgm")
	m.give(cs...)
	args := daemonArgs(m, srv.URL, "--verify-every", "200ms")
	ps := []*proc{start(t, nil, args...), start(t, nil, args...)}
	// At least three kills, and churning for at least 20 s: on a loaded machine a kill's round
	// (a leader, two of its passes, a restart) takes longer than 7 s, and a time alone left the
	// churn unchurned.
	deadline := time.Now().Add(20 * time.Second)
	kills := 0
	for kills < 3 || time.Now().Before(deadline) {
		var leader *proc
		eventually(t, "a leader", func() bool {
			l := leaders(ps)
			if len(l) == 1 {
				leader = l[0]
			}
			return leader != nil
		})
		leader.passes(2)
		is.NoErr(leader.g.Signal(syscall.SIGKILL))
		<-leader.g.Exited()
		kills++
		for i, p := range ps {
			if p == leader {
				ps[i] = start(t, nil, args...)
			}
		}
		cs[kills%len(cs)].password = randomHex(8) // work for the next leader: a rotation
		m.give(cs...)
	}
	for _, c := range cs {
		eventually(t, "converged after the churn", func() bool { return c.logsIn(t, srv.URL) })
	}

	all := statements(t, srv, m.resource)
	sort.SliceStable(all, func(i, j int) bool { return all[i].at.Before(all[j].at) })
	// A replica's pass runs from a look at its lease to its last acting statement before its
	// next look.
	type span struct{ from, to time.Time }
	passes := map[string][]span{}
	open := map[string]*span{}
	for _, s := range all {
		switch {
		case s.lease:
			if o := open[s.replica]; o != nil && !o.to.IsZero() {
				passes[s.replica] = append(passes[s.replica], *o)
			}
			open[s.replica] = &span{from: s.at}
		case !strings.Contains(s.text, "-- ping") && open[s.replica] != nil:
			open[s.replica].to = s.at
		}
	}
	for r, o := range open {
		if !o.to.IsZero() {
			passes[r] = append(passes[r], *o)
		}
	}
	is.True(len(passes) >= 3) // passes of several replicas were seen
	overlaps := 0
	for r, spans := range passes {
		for _, sp := range spans {
			for _, s := range acting(all) {
				if s.replica != r && !s.at.Before(sp.from) && !s.at.After(sp.to) {
					overlaps++
					t.Logf("%s acted at %s, during a pass of %s (%s to %s): %s", s.replica, s.at.Format(time.StampMilli), r,
						sp.from.Format(time.StampMilli), sp.to.Format(time.StampMilli), s.text)
				}
			}
		}
	}
	is.Equal(overlaps, 0) // never two acting at once
}

// TestOneLeaseWhateverTheURL: two replicas whose URLs name different databases, one of them
// a template: one leads (the lease is in the provider's database, not the URL's), and no
// session of theirs sits in template1, which would fail every CREATE DATABASE.
func TestOneLeaseWhateverTheURL(t *testing.T) {
	is := is.New(t)
	srv := pgserver.Shared(t)
	m := newMesh(t)
	template1, err := url.Parse(srv.URL)
	is.NoErr(err)
	template1.Path = "/template1"
	cs := []consumer{{as: name("url"), password: randomHex(8)}}
	m.give(cs...)
	ps := []*proc{start(t, nil, daemonArgs(m, srv.URL)...), start(t, nil, daemonArgs(m, template1.String())...)}
	eventually(t, "the consumer logs in", func() bool { return cs[0].logsIn(t, srv.URL) }) // its database was created
	for _, p := range ps {
		p.passes(3)
	}
	is.Equal(len(leaders(ps)), 1) // exactly one acts
	var inTemplate int
	is.NoErr(query(t, srv.URL, "", `SELECT count(*) FROM pg_stat_activity
		WHERE datname = 'template1' AND application_name LIKE 'novox-provisioner/`+m.resource+`/%'`, &inTemplate))
	is.Equal(inTemplate, 0) // no session of theirs in the template
	added := consumer{as: name("url"), password: randomHex(8)}
	m.give(append(cs, added)...)
	eventually(t, "a consumer added later logs in", func() bool { return added.logsIn(t, srv.URL) }) // CREATE DATABASE works on
	is.Equal(len(leaders(ps)), 1)
	is.Equal(ps[1].count("the connection URL names database template1; the provider's sessions, its lease and its locks use postgres"), 1)
}
