package postgres_test

import (
	"strings"
	"testing"

	"github.com/matryer/is"
)

// What differs between the supported PostgreSQL versions (14 to 18), each tested on the versions
// where it differs and skipped, saying why, elsewhere: make test PG=<major> runs them. The
// server's major version is env.major (ownership_test.go).

// stored is the password verifier the server stores for role.
func (e *env) stored(role string) string {
	e.t.Helper()
	var s string
	is.New(e.t).NoErr(e.admin("").QueryRow(ctx, "SELECT rolpassword FROM pg_authid WHERE rolname = $1", role).Scan(&s))
	return s
}

// withParam is the server's URL with a runtime parameter for the sessions that use it.
func withParam(url, param string) string {
	if strings.Contains(url, "?") {
		return url + "&" + param
	}
	return url + "?" + param
}

func TestVerifiersUseTheServersScramIterationsAndOthersStillVerify(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	if m := e.major(); m < 16 {
		t.Skipf("PostgreSQL %d has no scram_iterations (16 and later): every verifier has 4096", m)
	}
	// The provider's sessions have scram_iterations 8192, as a setting on its role would give them.
	b := e.backend(withParam(e.srv.URL, "scram_iterations=8192"))
	p := provision(name("iter"))
	is.NoErr(errOf(b.Create(ctx, p)))
	stored := e.stored(p.As)
	is.True(strings.HasPrefix(stored, "SCRAM-SHA-256$8192:")) // computed with the server's setting
	e.mustLogin(p.As, p.Password, p.As)                       // and the server lets the consumer in with it

	// A provider whose sessions have the default (4096) finds a verifier of 8192 held, and leaves it.
	is.True(e.holds(p)) // another count of iterations is not drift
	e.mustCreate(p)
	is.Equal(e.stored(p.As), stored) // nothing rewritten

	// The server's own verifier of the minted password, with yet another count, verifies too.
	e.exec("", "SET scram_iterations = 5000", "ALTER ROLE "+p.As+" PASSWORD '"+p.Password+"'")
	is.True(strings.HasPrefix(e.stored(p.As), "SCRAM-SHA-256$5000:")) // the server made it
	is.True(e.holds(p))                                               // held
}

func TestOn18AnMD5PasswordIsDriftAndGetsAVerifier(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	if m := e.major(); m < 18 {
		t.Skipf("PostgreSQL %d still takes md5 passwords: one made from the minted password verifies there (TestHoldsVerifiesAnMD5Password)", m)
	}
	p := provision(name("md5"))
	e.mustCreate(p)
	// Deprecated on 18, and still possible: the server warns, and stores md5.
	e.exec("", "SET password_encryption = 'md5'", "ALTER ROLE "+p.As+" PASSWORD '"+p.Password+"'")
	is.True(strings.HasPrefix(e.stored(p.As), "md5")) // the server stores md5 of the minted password
	held, err := holdsOne(ctx, e.b, p)
	is.NoErr(err)
	is.True(!held.Held)                        // drift, though made from the minted password
	is.Equal(held.Drift, []string{"password"}) // and only that
	e.mustCreate(p)
	is.True(strings.HasPrefix(e.stored(p.As), "SCRAM-SHA-256$")) // repaired with a SCRAM verifier
	is.True(e.holds(p))
	e.mustLogin(p.As, p.Password, p.As)
}
