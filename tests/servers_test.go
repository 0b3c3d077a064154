package tests

import (
	"testing"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/tests/pgserver"
)

// ownServer starts a server of the test's own, with settings, in a folder of the test's that
// stays when it stops (so a test can stop it and start it again on the same port). It is
// stopped with the test; where this machine has no server binaries, the test is skipped,
// saying why.
func ownServer(t *testing.T, why string, settings map[string]string) *pgserver.Server {
	t.Helper()
	if !pgserver.Available() {
		t.Skipf("%s needs a server of the test's own, and this machine has no server binaries", why)
	}
	srv, err := pgserver.Start(pgserver.Options{Dir: serverDir(t) + "/pg", Settings: settings})
	is.New(t).NoErr(err) // start a server
	t.Cleanup(func() { _ = srv.Stop() })
	return srv
}
