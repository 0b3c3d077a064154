package postgres_test

import (
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/ports"
)

// listed is what b's record says of as, and whether it names it.
func listed(t *testing.T, b *postgres.Backend, as string) (ports.Managed, bool) {
	t.Helper()
	managed, err := b.Managed(ctx)
	is.New(t).NoErr(err) // the record can be read
	for _, m := range managed {
		if m.As == as {
			return m, true
		}
	}
	return ports.Managed{}, false
}

// rolePowers is what a role is allowed, as the catalog says.
func (e *env) rolePowers(role string) string {
	e.t.Helper()
	var s string
	is.New(e.t).NoErr(e.admin("").QueryRow(ctx, `SELECT concat_ws(',', CASE WHEN rolsuper THEN 'super' END,
		CASE WHEN rolcanlogin THEN 'login' END, CASE WHEN rolcreaterole THEN 'createrole' END) FROM pg_roles WHERE rolname = $1`, role).Scan(&s))
	return s
}

func TestAPlainRoleIsAdoptedOnceAndGetsTheMintedPassword(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := provision(name("plain"))
	e.exec("", "CREATE ROLE "+p.As+" LOGIN PASSWORD 'made-by-the-old-provisioner'")
	_, ok := listed(t, e.b, p.As)
	is.True(!ok) // not in the record yet

	e.mustCreate(p)
	e.mustLogin(p.As, p.Password, p.As) // the minted password works
	_, err := e.login(p.As, "made-by-the-old-provisioner", p.As)
	is.True(err != nil) // the old one no longer
	m, ok := listed(t, e.b, p.As)
	is.True(ok && !m.Withdrawn) // recorded, active
	e.mustCreate(p)
	is.Equal(e.log.said(), []string{p.As + ": adopted the existing role " + p.As + ", a plain login role the provider did not make: " +
		"it now has the minted password and is managed like any other"}) // said once, over two creates
	is.True(e.holds(p))
}

func TestARoleWithPowersIsNotTakenOver(t *testing.T) {
	cases := []struct {
		name  string
		setup func(e *env, role string)
		says  string
	}{
		{"a superuser", func(e *env, role string) { e.exec("", "CREATE ROLE "+role+" SUPERUSER LOGIN PASSWORD 'theirs'") }, "a superuser"},
		{"allowed to create roles", func(e *env, role string) { e.exec("", "CREATE ROLE "+role+" CREATEROLE LOGIN PASSWORD 'theirs'") }, "allowed to create roles"},
		{"a member of a powerful role", func(e *env, role string) {
			e.exec("", "CREATE ROLE "+role+"_admins CREATEROLE", "CREATE ROLE "+role+" LOGIN PASSWORD 'theirs'", "GRANT "+role+"_admins TO "+role)
		}, "a member of " + "%s_admins"},
		{"a member of a predefined role", func(e *env, role string) {
			e.exec("", "CREATE ROLE "+role+" LOGIN PASSWORD 'theirs'", "GRANT pg_write_server_files TO "+role)
		}, "a member of pg_write_server_files"},
		{"granted to another role", func(e *env, role string) { // which would share its database
			e.exec("", "CREATE ROLE "+role+" LOGIN PASSWORD 'theirs'", "CREATE ROLE "+role+"_friend LOGIN", "GRANT "+role+" TO "+role+"_friend")
		}, "granted to %s_friend"},
		{"the owner of another database", func(e *env, role string) { // which a drop would take with it
			e.exec("", "CREATE ROLE "+role+" LOGIN PASSWORD 'theirs'", "CREATE DATABASE "+role+"_sales OWNER "+role)
		}, "the owner of %s_sales"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t)
			p := provision(name("power"))
			c.setup(e, p.As)
			before, catalog := e.rolePowers(p.As), e.catalog()
			err := errOf(e.b.Create(ctx, p))
			is.True(err != nil) // refused
			says := strings.ReplaceAll(c.says, "%s", p.As)
			is.Equal(err.Error(), "create role "+p.As+": role "+p.As+" exists, the provider did not make it, and it is "+says+"; it is not taken over")
			is.Equal(e.rolePowers(p.As), before) // nothing of it changed
			is.Equal(e.catalog(), catalog)       // nor any database made for it
			e.mustLogin(p.As, "theirs", "postgres")
			_, ok := listed(t, e.b, p.As)
			is.True(!ok) // and not recorded
		})
	}
}

func TestAdoptNoneRefusesEvenAPlainRole(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	strict := e.backendWith(postgres.Config{URL: e.srv.URL, Adopt: postgres.AdoptNone})
	p := provision(name("strict"))
	e.exec("", "CREATE ROLE "+p.As+" LOGIN PASSWORD 'theirs'")
	err := errOf(strict.Create(ctx, p))
	is.Equal(err.Error(), "create role "+p.As+": role "+p.As+" exists and the provider did not make it; it is not taken over (adoption is off)")
	e.mustLogin(p.As, "theirs", "postgres") // untouched
	q := provision(name("strict"))
	is.NoErr(errOf(strict.Create(ctx, q))) // a role it makes itself is no adoption
}

func TestTwoResourcesOnOneServerNeverTouchEachOthersConsumers(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	one := e.backendWith(postgres.Config{URL: e.srv.URL, Resource: "postgres-one"})
	two := e.backendWith(postgres.Config{URL: e.srv.URL, Resource: "postgres-two"})
	p, q := provision(name("one")), provision(name("two"))
	is.NoErr(errOf(one.Create(ctx, p)))
	is.NoErr(errOf(two.Create(ctx, q)))

	_, seen := listed(t, two, p.As)
	is.True(!seen) // two does not see one's consumer
	_, seen = listed(t, one, q.As)
	is.True(!seen) // nor one two's
	err := errOf(two.Create(ctx, p))
	is.Equal(err.Error(), "create role "+p.As+": role "+p.As+` is managed by the provider of "postgres-one", not "postgres-two"; it is not taken over`)
	is.True(two.Remove(ctx, p.As) != nil) // refused
	is.True(two.Drop(ctx, p.As) != nil)   // refused
	held, err := holdsOne(ctx, one, p)
	is.NoErr(err)
	is.True(held.Held) // one's consumer as it was
	e.mustLogin(p.As, p.Password, p.As)
	held, err = holdsOne(ctx, two, p)
	is.NoErr(err)
	is.True(!held.Held) // and not two's to hold
}

func TestDropFinishesWhereTheRoleWasGrantedThingsElsewhere(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := provision(name("spread"))
	e.mustCreate(p)
	other := p.As + "_elsewhere"
	e.exec("", "CREATE DATABASE "+other, "GRANT CONNECT, CREATE ON DATABASE "+other+" TO "+p.As)
	e.exec(other, "GRANT CREATE ON SCHEMA public TO "+p.As, "CREATE TABLE shared (x int)", "GRANT SELECT ON shared TO "+p.As)

	is.NoErr(e.b.Drop(ctx, p.As)) // finishes, no 2BP01: what it was granted is revoked
	var roles, tables int
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT count(*) FROM pg_roles WHERE rolname = $1", p.As).Scan(&roles))
	is.Equal(roles, 0) // the role is gone
	is.NoErr(e.admin(other).QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'shared'").Scan(&tables))
	is.Equal(tables, 1) // what it was only granted stays
	_, ok := listed(t, e.b, p.As)
	is.True(!ok) // and its record
}

func TestDropTakesOnlyTheDatabaseItMade(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := provision(name("given"))
	e.mustCreate(p)
	gift := p.As + "_gift"
	e.exec("", "CREATE DATABASE "+gift+" OWNER "+p.As) // somebody handed the consumer a database

	err := e.b.Drop(ctx, p.As)
	is.True(err != nil) // refused, saying what to do
	is.Equal(err.Error(), "role "+p.As+" also owns "+gift+", which the provider did not make for it; not dropped: "+
		"give it another owner (ALTER DATABASE ... OWNER TO) or drop it")
	exists := func(db string) bool {
		var n int
		is.NoErr(e.admin("").QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", db).Scan(&n))
		return n == 1
	}
	is.True(exists(gift) && exists(p.As)) // the gift stays, and so does its own until the role can go
	var login bool
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT rolcanlogin FROM pg_roles WHERE rolname = $1", p.As).Scan(&login))
	is.True(!login) // the login is withdrawn all the same

	e.exec("", "ALTER DATABASE "+gift+" OWNER TO postgres")
	is.NoErr(e.b.Drop(ctx, p.As)) // then it finishes
	is.True(exists(gift) && !exists(p.As))
}

func TestRemoveKeepsTheTimeItWasFirstWithdrawn(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := provision(name("since"))
	e.mustCreate(p)
	is.NoErr(e.b.Remove(ctx, p.As))
	first, _ := listed(t, e.b, p.As)
	is.NoErr(e.b.Remove(ctx, p.As))
	again, _ := listed(t, e.b, p.As)
	is.True(first.Withdrawn && !first.Since.IsZero())
	is.Equal(again.Since, first.Since) // withdrawn since the first time, for --drop-after
}

func TestTheRecordHoldsNoSecret(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := provision(name("nosecret"))
	e.mustCreate(p)
	var comment string
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1", p.As).Scan(&comment))
	is.True(strings.HasPrefix(comment, "novox-provisioner {")) // the record
	is.True(!strings.Contains(comment, p.Password))            // no password
	is.True(!strings.Contains(comment, "SCRAM"))               // nor its verifier
}

func TestARoleThatMayNeitherCreateRolesNorDatabasesIsTheServersProblem(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	weak := name("weak")
	e.exec("", "CREATE ROLE "+weak+" LOGIN CREATEROLE PASSWORD 'weak-pw'")
	_, err := e.backend(e.urlAs(weak, "weak-pw")).Managed(ctx)
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), "the provider's role "+weak+" is not a superuser and lacks CREATEDB")) // names the role, and what it lacks
}

// comment is the role's comment, "" where it has none.
func (e *env) comment(role string) string {
	e.t.Helper()
	var c *string
	is.New(e.t).NoErr(e.admin("").QueryRow(ctx, "SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1", role).Scan(&c))
	if c == nil {
		return ""
	}
	return *c
}

// Issue 28, case 7d: after an upgrade from the record's first format (no "v", no login),
// a withdrawn consumer's record is rewritten in the current one when the record is read, and
// it stays withdrawn, since the same time; a Backend that only looks rewrites nothing.
func TestAWithdrawnConsumersRecordOfTheOldFormatIsRewritten(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := provision(name("old"))
	e.mustCreate(p)
	is.NoErr(e.b.Remove(ctx, p.As))
	old := `novox-provisioner {"resource":"postgres","database":"` + p.As + `","state":"withdrawn","since":"2026-11-30T08:00:00Z"}`
	e.exec("", "COMMENT ON ROLE "+p.As+" IS '"+old+"'") // as the provider before the format wrote it

	looking := e.backendWith(postgres.Config{URL: e.srv.URL, ReadOnly: true})
	m, ok := listed(t, looking, p.As)
	is.True(ok && m.Withdrawn)     // read as before
	is.Equal(e.comment(p.As), old) // and left alone by a Backend that only looks

	m, ok = listed(t, e.b, p.As)
	is.True(ok && m.Withdrawn) // still withdrawn
	is.Equal(m.Since, time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))
	is.Equal(e.comment(p.As), `novox-provisioner {"v":1,"login":"`+p.As+`","resource":"postgres","database":"`+p.As+
		`","databases":["`+p.As+`"],"state":"withdrawn","since":"2026-11-30T08:00:00Z"}`) // in the current format
	is.Equal(e.rolePowers(p.As), "") // its login not given back
	listed(t, e.b, p.As)
	is.Equal(len(e.log.said()), 0) // nothing said
	is.NoErr(e.b.Drop(ctx, p.As))  // and dropped with the database its record gives
	var left bool
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", p.As).Scan(&left))
	is.True(!left)
}

// A withdrawn record is rewritten by a Backend whose pool holds one connection: the rewrite
// does not wait for the connection the listing still holds.
func TestAWithdrawnRecordIsRewrittenOnAPoolOfOne(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := provision(name("old1"))
	e.mustCreate(p)
	is.NoErr(e.b.Remove(ctx, p.As))
	old := `novox-provisioner {"resource":"postgres","database":"` + p.As + `","state":"withdrawn","since":"2026-11-30T08:00:00Z"}`
	e.exec("", "COMMENT ON ROLE "+p.As+" IS '"+old+"'")

	b := e.backendWith(postgres.Config{URL: e.srv.URL, MaxConnections: 1, Timeout: 3 * time.Second})
	start := time.Now()
	m, ok := listed(t, b, p.As)
	is.True(ok && m.Withdrawn)
	is.True(time.Since(start) < 3*time.Second)          // no wait for a connection it holds itself
	is.True(strings.Contains(e.comment(p.As), `"v":1`)) // rewritten
	is.Equal(len(e.log.said()), 0)                      // nothing said
}
