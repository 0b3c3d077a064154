package tests

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/tests/pgserver"
)

// TestTheBrakesBaselineOutlivesTheProcess cuts a file of 12 consumers down in two steps, each
// just under half of what is left (5 of 12, then 3 of 7): the second step is a mass withdrawal
// only against the most managed within the hour (8 of the 12). Between the steps the daemon is
// restarted, or its leader killed so that a standby takes over, or stopped while the file
// changes: each time the second step is held and said as one process says it, the record's
// withdrawal times standing in for the memory the process lost.
func TestTheBrakesBaselineOutlivesTheProcess(t *testing.T) {
	for _, between := range []string{"restart", "take-over", "changed while down"} {
		t.Run(between, func(t *testing.T) {
			is := is.New(t)
			url := pgserver.Shared(t).URL
			m := newMesh(t)
			cs := consumers("base", 12)
			m.give(cs...)
			args := daemonArgs(m, url, "--withdraw-settle", "2s")
			p := start(t, nil, args...)
			eventually(t, "all twelve made", func() bool { return p.metric(`provisioner_consumers{state="applied"}`) == 12 })
			var standby *proc
			if between == "take-over" {
				standby = start(t, nil, args...)
				standby.passes(2)
				is.Equal(standby.metric(`provisioner_leader`), 0.0) // stands by
			}

			m.give(cs[:7]...) // 5 of 12 leave: not more than half
			eventually(t, "the first step withdrawn", func() bool { return !cs[7].logsIn(t, url) && !cs[11].logsIn(t, url) })
			is.Equal(p.count("WITHDRAWAL HELD"), 0)

			var next *proc
			switch between {
			case "restart":
				is.Equal(p.stop(), 0)
				next = start(t, nil, args...)
				next.passes(2)
				m.give(cs[:4]...)
			case "take-over":
				is.NoErr(p.g.Signal(syscall.SIGKILL))
				<-p.g.Exited()
				next = standby
				eventually(t, "the standby takes over", func() bool { return next.metric(`provisioner_leader`) == 1 })
				m.give(cs[:4]...)
			case "changed while down":
				is.Equal(p.stop(), 0)
				m.give(cs[:4]...)
				next = start(t, nil, args...)
			}
			held := fmt.Sprintf("WITHDRAWAL HELD: %s no longer lists 3 of the 7 consumers the provider manages (with those "+
				"withdrawn before, 8 of the 12 it managed within the last hour); they are withdrawn only once the file has "+
				"stayed unchanged for 12s.", m.file)
			eventually(t, "the second step held, and said as in one process", func() bool { return next.count(held) == 1 })
			is.True(cs[4].logsIn(t, url)) // still there while held
			is.True(cs[6].logsIn(t, url))
			is.Equal(next.metric(`provisioner_mass_withdrawal`), 1.0)
			eventually(t, "withdrawn once the file stayed unchanged for six settles", func() bool {
				return !cs[4].logsIn(t, url) && !cs[6].logsIn(t, url)
			})
			is.True(cs[3].logsIn(t, url)) // what the file lists stays
			is.Equal(next.count(held), 1) // said once
		})
	}
}
