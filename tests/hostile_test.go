package tests

import (
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/tests/pgserver"
)

// TestAHostileLoginStaysOneLine: issue 19, item 5. A login holding a newline and a terminal's
// clear-screen (and so a secret path holding them too, as the mesh names secrets after logins)
// writes no line that reads like the provider's own, and no raw escape byte.
func TestAHostileLoginStaysOneLine(t *testing.T) {
	is := is.New(t)
	url := pgserver.Shared(t).URL
	m := newMesh(t)
	forged := "[provisioner:" + m.resource + "] h0001: no longer in contributions.json; withdrawing it from the backend"
	m.give(consumer{as: "evil\x1b[2J\n" + forged, password: "pw"})
	p := start(t, nil, m.args("--database-url", url, "--every", "100ms")...)
	p.passes(10)
	is.Equal(p.stop(), 0)
	out := p.stderr.String()
	is.True(!strings.Contains(out, "\x1b")) // no raw escape byte
	said := 0
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		is.True(!strings.HasPrefix(line, forged))                         // no forged line
		is.True(strings.HasPrefix(line, "[provisioner:"+m.resource+"] ")) // every line is the provider's, whole
		if strings.Contains(line, "h0001") {
			said++
		}
	}
	is.Equal(said, 1) // its failure, said once, in one line
}
