package tests

import (
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/tests/pgserver"
)

// roleLeft is whether the role exists and whether it can log in.
func roleLeft(t *testing.T, url, role string) (exists, login bool) {
	t.Helper()
	var n int
	var canLogin bool
	err := query(t, url, "", fmt.Sprintf("SELECT count(*), coalesce(bool_or(rolcanlogin), false) FROM pg_roles WHERE rolname = '%s'", role), &n, &canLogin)
	is.New(t).NoErr(err)
	return n == 1, canLogin
}

func TestAConsumerRemovedWhileTheDaemonWasStoppedIsWithdrawnAtTheStart(t *testing.T) {
	for _, policy := range []string{"retain", "drop"} {
		t.Run(policy, func(t *testing.T) {
			is := is.New(t)
			url := pgserver.Shared(t).URL
			m := newMesh(t)
			stays := consumer{as: name("stays"), password: randomHex(8)}
			leaves := consumer{as: name("leaves"), password: randomHex(8)}
			m.give(stays, leaves)
			args := daemonArgs(m, url, "--on-withdraw", policy, "--drop-after", "0")
			p := start(t, nil, args...)
			eventually(t, "both log in", func() bool { return stays.logsIn(t, url) && leaves.logsIn(t, url) })
			is.Equal(p.stop(), 0) // an upgrade, say

			m.give(stays) // leaves is removed while the daemon is down
			m.aged()
			p = start(t, nil, args...)
			p.passes(1)
			exists, login := roleLeft(t, url, leaves.as)
			is.True(!login)                                            // withdrawn in the first pass after the start
			is.Equal(exists, policy == "retain")                       // and with drop, gone
			is.True(stays.logsIn(t, url))                              // the other as it was
			is.Equal(p.count("create failed")+p.count(": refused"), 0) // nothing re-created, nor refused
		})
	}
}

func TestAConsumerRemovedAfterAKillInTheMiddleOfAPassIsWithdrawn(t *testing.T) {
	is := is.New(t)
	url := pgserver.Shared(t).URL
	m := newMesh(t)
	cs := consumers("kill", 12, "pg_trgm")
	m.give(cs...)
	p := start(t, nil, daemonArgs(m, url)...)
	eventually(t, "some made", func() bool { return cs[0].logsIn(t, url) })
	is.NoErr(p.g.Signal(syscall.SIGKILL)) // in the middle of the first pass, most likely
	<-p.g.Exited()

	m.give(cs[:6]...) // the last six leave
	m.aged()
	p = start(t, nil, daemonArgs(m, url)...)
	eventually(t, "the six that stay log in", func() bool {
		for _, c := range cs[:6] {
			if !c.logsIn(t, url) {
				return false
			}
		}
		return true
	})
	p.passes(2)
	for _, c := range cs[6:] {
		_, login := roleLeft(t, url, c.as)
		is.True(!login) // whatever the killed pass made of it, its login is gone
	}
}

func TestNothingIsWithdrawnUntilTheRecordCanBeRead(t *testing.T) {
	is := is.New(t)
	srv := ownServer(t, "stopping and starting a server", nil)
	url, port := srv.URL, srv.Port
	m := newMesh(t)
	stays := consumer{as: name("stays"), password: randomHex(8)}
	leaves := consumer{as: name("leaves"), password: randomHex(8)}
	m.give(stays, leaves)
	code, _ := runOnce(t, nil, m.args("--once", "--database-url", url)...)
	is.Equal(code, 0) // both made
	is.NoErr(srv.Stop())

	m.give(stays)
	p := start(t, nil, daemonArgs(m, url)...)
	eventually(t, "the server said to be down", func() bool { return p.count("cannot be reached") == 1 })
	p.passes(3)
	is.Equal(p.count("withdrawing"), 0) // nothing read is nobody withdrawn
	is.Equal(p.count("cannot be reached"), 1)

	srv, err := pgserver.Start(pgserver.Options{Dir: srv.Dir, Port: port})
	is.NoErr(err)
	defer srv.Stop()
	eventually(t, "leaves withdrawn once the record is read", func() bool { _, login := roleLeft(t, url, leaves.as); return !login })
	is.True(stays.logsIn(t, url))
	is.Equal(p.count(leaves.as+": no longer in "+m.file+"; withdrawing"), 1)
}

func TestTwoResourcesOnOneServerEachWithdrawOnlyTheirOwn(t *testing.T) {
	is := is.New(t)
	url := pgserver.Shared(t).URL
	one, two := newMesh(t), newMesh(t)
	a := consumer{as: name("one"), password: randomHex(8)}
	b := consumer{as: name("two"), password: randomHex(8)}
	one.give(a)
	two.give(b)
	p1 := start(t, nil, daemonArgs(one, url)...)
	p2 := start(t, nil, daemonArgs(two, url)...)
	eventually(t, "both log in", func() bool { return a.logsIn(t, url) && b.logsIn(t, url) })
	p1.passes(3)
	p2.passes(3)
	is.True(a.logsIn(t, url) && b.logsIn(t, url)) // neither withdrew the other's
	two.give()
	eventually(t, "two's consumer withdrawn", func() bool { return !b.logsIn(t, url) })
	p1.passes(3)
	is.True(a.logsIn(t, url)) // one's stays
	is.Equal(p1.count("withdrawing"), 0)
}

func TestAdoptNoneLeavesARoleThatWasThereAlone(t *testing.T) {
	is := is.New(t)
	url := pgserver.Shared(t).URL
	m := newMesh(t)
	c := consumer{as: name("human"), password: randomHex(8)}
	is.NoErr(query(t, url, "", "CREATE ROLE "+c.as+" LOGIN PASSWORD 'a-persons-own'"))
	m.give(c)
	code, out := runOnce(t, nil, m.args("--once", "--database-url", url, "--adopt", "none")...)
	is.Equal(code, 1)
	is.True(strings.Contains(out, c.as+": refused: create role "+c.as+": role "+c.as+
		" exists and the provider did not make it; it is not taken over (adoption is off)")) // said, naming it
	is.NoErr(login(t, url, c.as, "a-persons-own", "postgres")) // untouched
	code, _ = runOnce(t, nil, m.args("--once", "--database-url", url)...)
	is.Equal(code, 0)         // the default adopts a plain role
	is.True(c.logsIn(t, url)) // under the minted password
}

// writes counts the statements a server logged with log_statement=ddl: every CREATE, ALTER,
// GRANT, REVOKE, COMMENT and DROP.
func writes(t *testing.T, srv *pgserver.Server, from int) (int, int) {
	t.Helper()
	raw, err := srv.Log()
	is.New(t).NoErr(err)
	return len(regexp.MustCompile(`(?m)LOG:  statement: `).FindAllIndex(raw[from:], -1)), len(raw)
}

func TestARestartOverConvergedConsumersWritesNothing(t *testing.T) {
	is := is.New(t)
	srv := ownServer(t, "counting statements", map[string]string{"log_statement": "ddl"})
	m := newMesh(t)
	cs := consumers("steady", 20, "pg_trgm")
	m.give(cs...)
	p := start(t, nil, daemonArgs(m, srv.URL)...)
	eventually(t, "all converged", func() bool {
		return p.metric(`provisioner_consumers{state="applied"}`) == 20
	})
	is.Equal(p.stop(), 0)
	before, size := writes(t, srv, 0)
	is.True(before >= 20*3) // the first start wrote (so the count can bite)

	p = start(t, nil, daemonArgs(m, srv.URL)...)
	p.passes(3) // the start, and a verify interval or more
	eventually(t, "all checked", func() bool { return p.metric(`provisioner_consumers{state="applied"}`) == 20 })
	is.Equal(p.stop(), 0)
	after, _ := writes(t, srv, size)
	is.Equal(after, 0) // the restart wrote nothing: no CREATE, ALTER, GRANT, REVOKE nor COMMENT
	is.True(!strings.Contains(p.stderr.String(), "create failed") && !strings.Contains(p.stderr.String(), ": refused"))
}
