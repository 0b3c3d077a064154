package tests

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/tests/pgserver"
)

// TestAConsumerMissingItsExtensionIsNeverGreen is the failure this provider exists for (letta
// crash-looped on a missing vector), seen from outside: a consumer asking for an extension the
// server does not have is incomplete, with what it lacks, in /status, provisioner status and
// the metrics, and provisioner plan exits 3 naming it; once the server has the extension, the
// next check makes it and the consumer is applied, by itself.
func TestAConsumerMissingItsExtensionIsNeverGreen(t *testing.T) {
	is := is.New(t)
	srv, m, carol, ext := lackingMesh(t, "carol", "novox_late_")
	lack := "extension " + ext + ": not available on this server"
	p := start(t, nil, daemonArgs(m, srv.URL)...)

	type status struct {
		Consumers []struct {
			As    string   `json:"as"`
			State string   `json:"state"`
			Lacks []string `json:"lacks"`
		} `json:"consumers"`
	}
	stateIs := func(state string, lacks []string) func() bool {
		return func() bool {
			var doc status
			if p.status(&doc) != nil || len(doc.Consumers) != 1 {
				return false
			}
			c := doc.Consumers[0]
			return c.As == carol.as && c.State == state && slices.Equal(c.Lacks, lacks)
		}
	}
	eventually(t, "carol incomplete, lacking "+ext, stateIs("incomplete", []string{lack}))
	eventually(t, "the metric counts it", func() bool { return p.metric(`provisioner_consumers{state="incomplete"}`) == 1 })
	is.Equal(p.metric(`provisioner_consumers{state="applied"}`), 0.0) // never green
	is.True(carol.logsIn(t, srv.URL))                                 // what could be made was made

	out, err := exec.Command(binary, "status", "--listen", p.listen).CombinedOutput()
	is.NoErr(err)
	row := lineOf(string(out), carol.as)
	is.True(strings.Contains(row, "incomplete") && strings.Contains(row, "lacks "+lack)) // the table says what it lacks

	code, doc, _ := planJSON(t, m.args("--database-url", srv.URL)...)
	is.Equal(code, 3) // something is not as the file asks
	planned := doc.of(t, carol.as)
	is.Equal(planned.Act, "incomplete")
	is.Equal(planned.Why, []string{"lacks " + lack})
	is.True(doc.Pending)
	code, text, _ := runPlan(t, m.args("--database-url", srv.URL)...)
	is.Equal(code, 3)
	is.True(strings.Contains(text, "1 incomplete")) // in the summary too

	srv.InstallExtension(t, pgserver.ThreeVersions(ext, false)) // the server gains it
	eventually(t, "carol applied once the server has "+ext, stateIs("applied", nil))
	is.Equal(p.metric(`provisioner_consumers{state="incomplete"}`), 0.0)
	var installed string
	is.NoErr(query(t, srv.URL, carol.as, "SELECT extname::text FROM pg_extension WHERE extname = '"+ext+"'", &installed))
	is.Equal(installed, ext) // made by the check that found it missing
	code, _, _ = runPlan(t, m.args("--database-url", srv.URL)...)
	is.Equal(code, 0)
	is.Equal(p.stop(), 0)
}

// lackingMesh is the shared server and a mesh listing one consumer, named after who, that asks
// for an extension the server does not have, named from prefix: the consumer and the
// extension.
func lackingMesh(t *testing.T, who, prefix string) (*pgserver.TestServer, *mesh, consumer, string) {
	t.Helper()
	srv := pgserver.Shared(t)
	ext := prefix + randomHex(3)
	m := newMesh(t)
	c := consumer{as: name(who), password: randomHex(8), extensions: []string{ext}}
	m.give(c)
	return srv, m, c, ext
}

// lineOf is the line of out that starts with as, "" where none does.
func lineOf(out, as string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, as+" ") {
			return line
		}
	}
	return ""
}

// What the backend tells of a consumer once (an extension the server does not have, skipped)
// is said once while it holds, by the loop's memory; once the consumer is withdrawn the loop
// forgets it, and listed again, it is said again. Issue 37: the adapter tells, the loop keeps
// what was said, as app wires them.
func TestWhatWasSaidOnceOfAConsumerIsSaidAgainWhenItComesBack(t *testing.T) {
	is := is.New(t)
	srv, m, dave, ext := lackingMesh(t, "dave", "novox_never_")
	line := dave.as + ": extension " + ext + " is not available on this server; skipped"
	p := start(t, nil, daemonArgs(m, srv.URL, "--verify-every", "1s")...)
	eventually(t, "the skip said", func() bool { return p.count(line) == 1 })
	is.NoErr(query(t, srv.URL, "", "ALTER ROLE "+dave.as+" PASSWORD 'behind-its-back'"))
	eventually(t, "the drift repaired: created again", func() bool {
		return p.count(dave.as+": what drifted: password") == 1 && dave.logsIn(t, srv.URL)
	})
	is.Equal(p.count(line), 1) // said once while it holds, though the repair met it again
	m.give()
	eventually(t, "dave withdrawn", func() bool { return p.count(dave.as+": withdrawn") == 1 })
	m.give(dave)
	eventually(t, "listed again: the skip said again", func() bool { return p.count(line) == 2 })
	is.Equal(p.stop(), 0)
}
