package postgres_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/ports"
	"github.com/novox/postgres-provider/tests/backendtest"
)

// urlAs is the server's URL, logging in as user with password.
func (e *env) urlAs(user, password string) string {
	e.t.Helper()
	u, err := url.Parse(e.srv.URL)
	is.New(e.t).NoErr(err)
	u.User = url.UserPassword(user, password)
	return u.String()
}

// delegated is a Backend whose role may create roles and databases and is not a superuser, as
// the admin of a managed server is, and that role's name.
func (e *env) delegated() (*postgres.Backend, string) {
	e.t.Helper()
	return e.delegatedWith("")
}

// delegatedWith is delegated, its role made with the attributes attrs besides (NOINHERIT).
func (e *env) delegatedWith(attrs string) (*postgres.Backend, string) {
	e.t.Helper()
	prov := name("prov")
	// The test server logs every statement: the operator's remedy the provider names keeps
	// the parameters of the provider's own statements out of it.
	e.exec("", "CREATE ROLE "+prov+" LOGIN CREATEROLE CREATEDB "+attrs+" PASSWORD 'prov-pw'",
		"ALTER ROLE "+prov+" SET log_parameter_max_length = 0")
	b := e.backend(e.urlAs(prov, "prov-pw"))
	_, err := b.Managed(ctx)
	is.New(e.t).NoErr(err)                              // the server checked as a whole
	is.New(e.t).Equal(b.Mode(), postgres.ModeDelegated) // and the mode read from it
	return b, prov
}

func TestDelegatedKeepsTheContract(t *testing.T) {
	e := newEnv(t)
	b, prov := e.delegated()
	from16 := e.major() >= 16
	w := e.contractWorld(e.urlAs(prov, "prov-pw"), backendtest.World{
		Join: func(t *testing.T, as string) {
			// As the provider's role, whose grants it may revoke (from PostgreSQL 16 a superuser's
			// it may not: TestDelegatedSaysAMembershipItCannotRevoke).
			conn := e.mustLogin(prov, "prov-pw", "postgres")
			for _, s := range []string{"CREATE ROLE " + as + "_up", "CREATE ROLE " + as + "_down LOGIN", "GRANT " + as + "_up TO " + as,
				"GRANT " + as + " TO " + as + "_down"} {
				if _, err := conn.Exec(ctx, s); err != nil {
					t.Fatalf("%s: %v", s, err)
				}
			}
		},
		Plain: func(t *testing.T, as string) {
			e.exec("", "CREATE ROLE "+as+" LOGIN PASSWORD 'theirs'")
			if from16 { // an operator lets the provider administer the role it is to take over
				e.exec("", "GRANT "+as+" TO "+prov+" WITH ADMIN OPTION, INHERIT FALSE, SET FALSE")
			}
		},
		Powerful: func(t *testing.T, as string) {
			e.exec("", "CREATE ROLE "+as+"_group", "CREATE ROLE "+as+" LOGIN PASSWORD 'theirs' IN ROLE "+as+"_group")
		},
	})
	backendtest.Run(t, b, func() ports.Provision { return provision(name("deleg"), "pg_trgm") }, w)
	t.Run("server", func(t *testing.T) {
		backendtest.RunServer(t, e.openServer(e.urlAs(prov, "prov-pw")), "prov-pw", func() ports.Provision { return provision(name("deleg")) })
	})
}

func TestDelegatedMakesWhatTheSuperuserMakes(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	b, prov := e.delegated()
	p := provision(name("letta"), "pg_trgm")
	is.NoErr(errOf(b.Create(ctx, p)))
	conn := e.mustLogin(p.As, p.Password, p.As)
	_, err := conn.Exec(ctx, "SELECT similarity('vector', 'vectors')")
	is.NoErr(err) // the trusted extension, usable by the consumer
	conn.Close(ctx)
	is.True(strings.Contains(e.role(p.As), p.As+">"+prov)) // the provider's own membership, its way to act as the owner
	held, err := holdsOne(ctx, b, p)
	is.NoErr(err)
	is.True(held.Held) // not drift for the provider that made it
	if e.major() >= 16 {
		var inherit bool
		is.NoErr(e.admin("").QueryRow(ctx, `SELECT bool_or(m.inherit_option) FROM pg_auth_members m
			WHERE m.roleid = $1::regrole AND m.member = $2::regrole`, p.As, prov).Scan(&inherit))
		is.True(!inherit) // SET, never INHERIT: the provider holds none of the consumer's privileges
	}
	_, err = e.login(prov, "prov-pw", p.As)
	is.NoErr(err) // the provider may connect, to make its schema and extensions
	_, err = e.login(p.As+"_nobody", "x", p.As)
	is.True(err != nil)
}

func TestDelegatedFindsPasswordDriftByLoggingIn(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	b, _ := e.delegated()
	p := provision(name("pwd"))
	is.NoErr(errOf(b.Create(ctx, p)))
	e.exec("", "ALTER ROLE "+p.As+" PASSWORD 'changed-behind-its-back'")
	held, err := holdsOne(ctx, b, p)
	is.NoErr(err)
	is.Equal(held.Drift, []string{"password"}) // found by the login
	is.NoErr(errOf(b.Create(ctx, p)))
	held, err = holdsOne(ctx, b, p)
	is.NoErr(err)
	is.True(held.Held) // and repaired
	e.mustLogin(p.As, p.Password, p.As)
}

func TestDelegatedSaysAConsumerAtItsConnectionLimitCouldNotBeChecked(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	b, _ := e.delegated()
	p := provision(name("busy"))
	p.Derived["connection_limit"] = float64(1)
	is.NoErr(errOf(b.Create(ctx, p)))
	e.mustLogin(p.As, p.Password, p.As) // the one connection it may have, in use
	held, err := holdsOne(ctx, b, p)
	is.True(err != nil) // could not check: not drift
	is.True(strings.Contains(err.Error(), "too many connections"))
	is.True(!held.Held && len(held.Drift) == 0)
}

func TestDelegatedWithdrawsAndDrops(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	b, _ := e.delegated()
	p := provision(name("gone"), "pg_trgm")
	is.NoErr(errOf(b.Create(ctx, p)))
	is.NoErr(b.Remove(ctx, p.As))
	_, err := e.login(p.As, p.Password, p.As)
	is.True(err != nil) // withdrawn
	is.NoErr(b.Drop(ctx, p.As))
	is.Equal(e.role(p.As), "") // the role gone
	var dbs int
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", p.As).Scan(&dbs))
	is.Equal(dbs, 0) // and its database
}

func TestDelegatedRefusesAServerThatWouldLogTheVerifier(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	loud := name("loud")
	e.exec("", "CREATE ROLE "+loud+" LOGIN CREATEROLE CREATEDB PASSWORD 'loud-pw'",
		"ALTER ROLE "+loud+" SET log_statement = 'all'", "ALTER ROLE "+loud+" SET log_parameter_max_length = -1")
	_, err := e.backend(e.urlAs(loud, "loud-pw")).Managed(ctx)
	is.True(err != nil) // nothing is done: the server's problem, said once
	is.True(strings.Contains(err.Error(), "logs what the provider would send it (log_statement = all)"))
}

func TestDelegatedKeepsTheVerifierOutOfTheServerLog(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	if e.srv.Local == nil {
		t.Skip("the server's log can be read only for a server these tests started")
	}
	b, _ := e.delegated()
	from := e.logSize()
	p := provision(name("secret"), "pg_trgm")
	p.Password = "Zq7-never-logged-" + randomHex(8)
	is.NoErr(errOf(b.Create(ctx, p)))
	e.exec("", "ALTER ROLE "+p.As+" PASSWORD 'drifted'")
	is.NoErr(errOf(b.Create(ctx, p))) // again: the password written anew
	held, err := holdsOne(ctx, b, p)
	is.NoErr(err)
	is.True(held.Held)
	e.exec("", "SELECT 'the log is written: "+p.As+"'")
	raw, err := e.srv.Local.Log()
	is.NoErr(err)
	log := string(raw[from:])
	is.True(strings.Contains(log, "the log is written: "+p.As)) // log_statement=all is on
	is.True(strings.Contains(log, "novox_password"))            // and caught the provider's statements
	is.True(!strings.Contains(log, p.Password))                 // never the password
	is.True(!strings.Contains(log, "SCRAM-SHA-256$"))           // nor even its verifier
}

func TestDelegatedSaysAMembershipItCannotRevoke(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	if e.major() < 16 {
		t.Skip("before PostgreSQL 16 a role with CREATEROLE may revoke any membership of a role that is not a superuser")
	}
	b, prov := e.delegated()
	p := provision(name("granted"))
	is.NoErr(errOf(b.Create(ctx, p)))
	e.exec("", "GRANT pg_read_server_files TO "+p.As) // by the superuser
	before := len(e.log.said())
	is.NoErr(errOf(b.Create(ctx, p))) // the rest is repaired
	is.NoErr(errOf(b.Create(ctx, p)))
	said := e.log.said()[before:]
	is.Equal(len(said), 1) // said once
	is.True(strings.Contains(said[0], p.As+": the membership of "+p.As+" in pg_read_server_files, granted by postgres, "+
		"cannot be revoked by the provider's role "+prov))
	held, err := holdsOne(ctx, b, p)
	is.NoErr(err)
	is.Equal(held.Drift, []string{"member of pg_read_server_files"}) // still drift, for an operator
}
