package postgres_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/ports"
)

// Delegated mode where the provider's role lacks what a superuser has: the power to end a
// consumer's sessions (pg_signal_backend), and, from PostgreSQL 16, the ADMIN option on a
// role it did not make.

func TestDelegatedWithdrawalWithoutPgSignalBackendSaysSoAndStillEnds(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	// From 16 the provider's membership in a consumer's role is never INHERIT, so it holds
	// none of its privileges, the one to end its sessions among them; before 16 a membership
	// inherits unless the member is NOINHERIT, which a provider's role may be.
	noinherit := ""
	if e.major() < 16 {
		noinherit = "NOINHERIT"
	}
	b, prov := e.delegatedWith(noinherit)
	p := provision(name("stays"))
	is.NoErr(errOf(b.Create(ctx, p)))
	session := e.mustLogin(p.As, p.Password, p.As)

	is.NoErr(b.Remove(ctx, p.As)) // the withdrawal finishes
	is.NoErr(b.Remove(ctx, p.As)) // and again, as every pass that withdraws would
	_, err := e.login(p.As, p.Password, p.As)
	is.True(err != nil) // NOLOGIN: nobody logs in as it any more
	_, err = session.Exec(ctx, "SELECT 1")
	is.NoErr(err) // the session it had stays, as the line says
	var lines []string
	for _, line := range e.log.said() {
		if strings.Contains(line, "sessions") {
			lines = append(lines, line)
		}
	}
	is.Equal(lines, []string{p.As + ": its sessions are not ended: the provider's role " + prov + " may not end them " +
		"(GRANT pg_signal_backend TO " + prov + "); they end when they disconnect"}) // said once, naming what it lacks
	held, err := holdsOne(ctx, b, p)
	is.NoErr(err)
	is.True(!held.Held) // withdrawn

	e.exec("", "GRANT pg_signal_backend TO "+prov) // the remedy the line names
	if noinherit != "" {
		e.exec("", "ALTER ROLE "+prov+" INHERIT") // which a NOINHERIT role holds only once it inherits
	}
	is.NoErr(b.Remove(ctx, p.As))
	is.True(e.ended(session)) // now its sessions end
}

func TestDelegatedAdoptsOnlyARoleItMayAdministerFrom16(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	if e.major() < 16 {
		t.Skip("before PostgreSQL 16 a role with CREATEROLE may alter any role that is not a superuser: adoption needs " +
			"nothing more (TestDelegatedKeepsTheContract adopts there)")
	}
	b, prov := e.delegated()
	p := provision(name("theirs"))
	e.exec("", "CREATE ROLE "+p.As+" LOGIN PASSWORD 'theirs'") // a plain login role, by a superuser
	before := e.role(p.As)
	err := errOf(b.Create(ctx, p))
	is.True(errors.Is(err, ports.ErrRefused)) // refused: not the provider's to take, until an operator says so
	is.True(strings.Contains(err.Error(), "role "+p.As+" exists, the provider did not make it, and the provider's role "+prov+
		" has no ADMIN option on it"))
	is.True(strings.Contains(err.Error(), `GRANT "`+p.As+`" TO "`+prov+`" WITH ADMIN OPTION, INHERIT FALSE, SET FALSE`)) // the remedy
	is.True(e.role(p.As) == before)                                                                                      // and nothing of it changed
	_, err = e.login(p.As, "theirs", "postgres")
	is.NoErr(err) // its own password still works

	e.exec("", "GRANT "+p.As+" TO "+prov+" WITH ADMIN OPTION, INHERIT FALSE, SET FALSE")
	is.NoErr(errOf(b.Create(ctx, p))) // adopted
	e.mustLogin(p.As, p.Password, p.As)
	held, err := holdsOne(ctx, b, p)
	is.NoErr(err)
	is.True(held.Held)
}

// TestDelegatedATrojanInATrustedExtensionNeverRunsAsSuperuser: a trusted extension's script
// runs as the bootstrap superuser for a provider that is not one, on every server, without any
// allow-list; the trap the consumer planted in its public schema must not be what the script's
// unqualified call finds.
func TestDelegatedATrojanInATrustedExtensionNeverRunsAsSuperuser(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	b, prov := e.delegated()
	p := trojan(t, e, b, "novox_trojan_trusted_test", true)
	is.Equal(e.extOwner(p.As, "novox_trojan_trusted_test"), prov) // created by the provider, as trusted ones are
	e.ranAsSuperuserInTheProvidersSchema(p.As, prov)
}
