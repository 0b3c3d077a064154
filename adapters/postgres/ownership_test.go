package postgres_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/ports"
)

// Only what is its own: a consumer's role holds its login and database and nothing else, and
// the provider takes, repairs and drops only what it made.

// role is everything the catalog says of a role, its memberships either way included, to show
// that nothing of it changed.
func (e *env) role(name string) string {
	e.t.Helper()
	var s string
	is.New(e.t).NoErr(e.admin("").QueryRow(ctx, `SELECT concat_ws(' | ', (SELECT row(a.*)::text FROM pg_authid a WHERE a.rolname = $1),
	(SELECT string_agg(g.rolname || '>' || m.rolname, ',' ORDER BY 1) FROM pg_auth_members x
	 JOIN pg_roles g ON g.oid = x.roleid JOIN pg_roles m ON m.oid = x.member WHERE $1 IN (g.rolname, m.rolname)),
	(SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1))`, name).Scan(&s))
	return s
}

// memberships are the grants that touch role, "group>member".
func (e *env) memberships(role string) []string {
	e.t.Helper()
	rows, _ := e.admin("").Query(ctx, `SELECT g.rolname || '>' || m.rolname FROM pg_auth_members x
	JOIN pg_roles g ON g.oid = x.roleid JOIN pg_roles m ON m.oid = x.member WHERE $1 IN (g.rolname, m.rolname) ORDER BY 1`, role)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	is.New(e.t).NoErr(err) // memberships
	return out
}

// major is the server's major version.
func (e *env) major() int {
	e.t.Helper()
	var n int
	is.New(e.t).NoErr(e.admin("").QueryRow(ctx, "SELECT current_setting('server_version_num')::int / 10000").Scan(&n))
	return n
}

func TestMembershipsEitherWayAreDriftAndTakenAway(t *testing.T) {
	e := newEnv(t)
	type grantCase = struct {
		name  string
		grant func(as string) []string
		drift []string
	}
	cases := []grantCase{
		{"a predefined role", func(as string) []string { return []string{"GRANT pg_read_server_files TO " + as} },
			[]string{"member of pg_read_server_files"}},
		{"the superuser, with admin option", func(as string) []string { return []string{"GRANT postgres TO " + as + " WITH ADMIN OPTION"} },
			[]string{"member of postgres"}},
		{"a chain through a role of nothing", func(as string) []string {
			return []string{"CREATE ROLE " + as + "_mid", "GRANT pg_write_server_files TO " + as + "_mid", "GRANT " + as + "_mid TO " + as}
		}, []string{"member of %s_mid", "member of pg_write_server_files through %s_mid"}},
		{"an intruder", func(as string) []string {
			return []string{"CREATE ROLE " + as + "_intruder LOGIN", "GRANT " + as + " TO " + as + "_intruder"}
		}, []string{"granted to %s_intruder"}},
		{"an intruder through a helper", func(as string) []string {
			return []string{"CREATE ROLE " + as + "_helper", "CREATE ROLE " + as + "_x LOGIN", "GRANT " + as + " TO " + as + "_helper WITH ADMIN OPTION",
				"GRANT " + as + "_helper TO " + as + "_x"}
		}, []string{"granted to %s_helper", "granted to %s_x through %s_helper"}},
	}
	if e.major() >= 16 { // a membership's options and its grantor hide nothing
		cases = append(cases, grantCase{"neither inherited nor settable, granted by another", func(as string) []string {
			return []string{"CREATE ROLE " + as + "_grp", "CREATE ROLE " + as + "_granter CREATEROLE", "GRANT " + as + "_grp TO " + as + "_granter WITH ADMIN OPTION",
				"GRANT " + as + "_grp TO " + as + " WITH INHERIT FALSE, SET FALSE GRANTED BY " + as + "_granter",
				"GRANT " + as + "_grp TO " + as + " WITH INHERIT TRUE"} // two grants, two grantors
		}, []string{"member of %s_grp"}})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			p := provision(name("member"))
			e.mustCreate(p)
			e.exec("", c.grant(p.As)...)
			held, err := holdsOne(ctx, e.b, p)
			is.NoErr(err)
			want := make([]string, len(c.drift))
			for i, d := range c.drift {
				want[i] = strings.ReplaceAll(d, "%s", p.As)
			}
			is.Equal(held.Drift, want) // named in an operator's words
			e.mustCreate(p)
			is.Equal(len(e.memberships(p.As)), 0) // every grant touching it revoked, in its transaction
			is.True(e.holds(p))
			e.mustLogin(p.As, p.Password, p.As)
		})
	}

	t.Run("what the membership gave is gone", func(t *testing.T) {
		is := is.New(t)
		p := provision(name("beta"))
		e.mustCreate(p)
		intruder := p.As + "_in"
		e.exec("", "GRANT postgres TO "+p.As, "CREATE ROLE "+intruder+" LOGIN PASSWORD 'in-pw'", "GRANT "+p.As+" TO "+intruder,
			"GRANT CONNECT ON DATABASE "+p.As+" TO "+intruder)
		conn := e.mustLogin(p.As, p.Password, p.As)
		_, err := conn.Exec(ctx, "SET ROLE postgres; RESET ROLE")
		is.NoErr(err) // the consumer could become the superuser
		conn.Close(ctx)
		e.mustCreate(p)
		conn = e.mustLogin(p.As, p.Password, p.As)
		_, err = conn.Exec(ctx, "SET ROLE postgres")
		is.True(err != nil) // no longer
		_, err = e.login(intruder, "in-pw", p.As)
		is.True(err != nil) // nor may the intruder use its database
	})
}

func TestOnlyARoleAsTheProviderWouldHaveMadeItIsAdopted(t *testing.T) {
	cases := []struct {
		name  string
		setup func(e *env, role string)
		says  string
	}{
		{"a member of a role of nothing that owns a database", func(e *env, r string) {
			e.exec("", "CREATE ROLE "+r+"_finance NOLOGIN", "CREATE DATABASE "+r+"_ledger OWNER "+r+"_finance",
				"CREATE ROLE "+r+" LOGIN PASSWORD 'theirs' IN ROLE "+r+"_finance")
		}, "a member of %s_finance"},
		{"a member of a group that may create databases", func(e *env, r string) {
			e.exec("", "CREATE ROLE "+r+"_creators CREATEDB NOLOGIN", "CREATE ROLE "+r+" LOGIN PASSWORD 'theirs' IN ROLE "+r+"_creators")
		}, "a member of %s_creators"},
		{"allowed to create databases", func(e *env, r string) {
			e.exec("", "CREATE ROLE "+r+" LOGIN CREATEDB PASSWORD 'theirs'")
		}, "allowed to create databases"},
		{"a role that cannot log in, owning tables elsewhere", func(e *env, r string) {
			e.exec("", "CREATE ROLE "+r+" NOLOGIN", "CREATE DATABASE "+r+"_app")
			e.exec(r+"_app", "CREATE TABLE facts (x int)", "ALTER TABLE facts OWNER TO "+r)
		}, "not a login role"},
		{"expired", func(e *env, r string) {
			e.exec("", "CREATE ROLE "+r+" LOGIN PASSWORD 'theirs' VALID UNTIL '2001-01-01'")
		}, "expired"},
		{"valid until a date", func(e *env, r string) {
			e.exec("", "CREATE ROLE "+r+" LOGIN PASSWORD 'theirs' VALID UNTIL '2999-01-01'")
		}, "valid only until a date"},
		{"the owner of a table in another database", func(e *env, r string) {
			e.exec("", "CREATE ROLE "+r+" LOGIN PASSWORD 'theirs'", "CREATE DATABASE "+r+"_warehouse")
			e.exec(r+"_warehouse", "CREATE TABLE facts (x int)", "ALTER TABLE facts OWNER TO "+r)
		}, "the owner of objects in %s_warehouse"},
		{"granted a table in another database", func(e *env, r string) {
			e.exec("", "CREATE ROLE "+r+" LOGIN PASSWORD 'theirs'", "CREATE DATABASE "+r+"_warehouse")
			e.exec(r+"_warehouse", "CREATE TABLE salaries (x int)", "GRANT SELECT ON salaries TO "+r)
		}, "granted privileges in %s_warehouse"},
		{"granted another database", func(e *env, r string) {
			e.exec("", "CREATE ROLE "+r+" LOGIN PASSWORD 'theirs'", "CREATE DATABASE "+r+"_warehouse", "GRANT CONNECT ON DATABASE "+r+"_warehouse TO "+r)
		}, "granted privileges in %s_warehouse"},
	}
	if newEnv(t).major() >= 16 { // options that only say how a membership is used hide nothing
		cases = append(cases, struct {
			name  string
			setup func(e *env, role string)
			says  string
		}{"a member that neither inherits nor may set the role", func(e *env, r string) {
			e.exec("", "CREATE ROLE "+r+"_finance NOLOGIN", "CREATE ROLE "+r+" LOGIN PASSWORD 'theirs'",
				"GRANT "+r+"_finance TO "+r+" WITH INHERIT FALSE, SET FALSE")
		}, "a member of %s_finance"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t)
			p := provision(name("hidden"))
			c.setup(e, p.As)
			before, catalog := e.role(p.As), e.catalog()
			err := errOf(e.b.Create(ctx, p))
			is.True(err != nil) // refused
			is.Equal(err.Error(), "create role "+p.As+": role "+p.As+" exists, the provider did not make it, and it is "+
				strings.ReplaceAll(c.says, "%s", p.As)+"; it is not taken over") // naming the first reason
			is.Equal(e.role(p.As), before) // nothing of it changed
			is.Equal(e.catalog(), catalog) // nor any database made for it
			_, ok := listed(t, e.b, p.As)
			is.True(!ok) // and not recorded
		})
	}

	t.Run("a plain role that owns its database, with tables in it", func(t *testing.T) {
		is := is.New(t)
		e := newEnv(t)
		p := provision(name("ownsdb"))
		e.exec("", "CREATE ROLE "+p.As+" LOGIN PASSWORD 'theirs'", "CREATE DATABASE "+p.As+" OWNER "+p.As)
		conn := e.mustLogin(p.As, "theirs", p.As)
		_, err := conn.Exec(ctx, "CREATE TABLE notes (x int)")
		is.NoErr(err)
		conn.Close(ctx)
		e.mustCreate(p) // what the earlier provisioner made is adopted
		is.True(e.holds(p))
	})
}

func TestARenamedRoleIsNoLongerTheProvidersAndKeepsItsData(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := provision(name("v"))
	e.mustCreate(p)
	conn := e.mustLogin(p.As, p.Password, p.As)
	_, err := conn.Exec(ctx, "CREATE TABLE keep (x int); INSERT INTO keep VALUES (42)")
	is.NoErr(err)
	conn.Close(ctx)
	parked := p.As + "_parked"
	e.exec("", "ALTER ROLE "+p.As+" RENAME TO "+parked) // an operator's
	t.Cleanup(func() {                                  // the server is shared: other tests' records must not meet this one
		e.exec("", "DROP DATABASE "+p.As+" WITH (FORCE)", "DROP ROLE "+parked)
	})

	_, ok := listed(t, e.b, parked)
	is.True(!ok) // the record moved with the role, but names its login: not the provider's
	_, ok = listed(t, e.b, p.As)
	is.True(!ok)
	listed(t, e.b, parked)
	is.Equal(e.log.said(), []string{"role " + parked + " carries the provider's record of " + p.As + ": it was renamed, or the record " +
		"copied; it is not the provider's and is never repaired, withdrawn or dropped"}) // said once, over two reads
	is.True(e.b.Remove(ctx, parked) != nil) // never withdrawn
	is.True(e.b.Drop(ctx, parked) != nil)   // nor dropped
	seen := e.b.Foresee(ctx, []ports.Provision{p}, postgres.DefaultTimeout)[0]
	err = errOf(e.b.Create(ctx, p))
	is.True(errors.Is(err, ports.ErrRefused)) // the consumer is the renamed role: refused, and backed off as any refusal
	renamed := p.As + " is now the role " + parked + " (renamed; " + parked + " carries the provider's record of " + p.As + ")"
	is.True(strings.Contains(err.Error(), "create role "+p.As+": "+renamed))          // naming the role it is now
	is.Equal(seen, ports.Foresight{Act: ports.ActRefuse, Why: []string{err.Error()}}) // and a plan says the same
	var made bool
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", p.As).Scan(&made))
	is.True(!made) // no second role made beside it
	var kept int
	is.NoErr(e.admin(p.As).QueryRow(ctx, "SELECT x FROM keep").Scan(&kept))
	is.Equal(kept, 42) // the data is there
	var login bool
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT rolcanlogin FROM pg_roles WHERE rolname = $1", parked).Scan(&login))
	is.True(login) // and the renamed role as the operator left it
}

func TestAConsumerListedAgainWithAnotherDatabaseIsDroppedWhole(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := provision(name("v4"))
	e.mustCreate(p)
	is.NoErr(e.b.Remove(ctx, p.As))
	again := provision(p.As)
	again.Password = p.Password
	again.Values["name"] = p.As + "a"
	e.mustCreate(again) // listed again, with another database
	is.NoErr(e.b.Remove(ctx, p.As))
	is.NoErr(e.b.Drop(ctx, p.As)) // both databases were the provider's
	var left int
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname IN ($1, $2)", p.As, p.As+"a").Scan(&left))
	is.Equal(left, 0)          // both dropped
	is.Equal(e.role(p.As), "") // and the role
}

func TestDropRevokesGrantsElsewhereButNeverDropsObjectsElsewhere(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := provision(name("spread"))
	e.mustCreate(p)
	warehouse := p.As + "_warehouse"
	e.exec("", "CREATE DATABASE "+warehouse, "GRANT CONNECT ON DATABASE "+warehouse+" TO "+p.As)
	e.exec(warehouse, "CREATE TABLE salaries (x int)", "GRANT SELECT ON salaries TO "+p.As, "CREATE TABLE facts (x int PRIMARY KEY)",
		"CREATE TABLE core (x int REFERENCES facts (x))", "ALTER TABLE facts OWNER TO "+p.As) // an operator hands it a table
	tables := func() int {
		var n int
		is.NoErr(e.admin(warehouse).QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename IN ('facts', 'core', 'salaries')").Scan(&n))
		return n
	}

	err := e.b.Drop(ctx, p.As)
	is.True(err != nil) // refused, saying what blocks it
	is.Equal(err.Error(), "role "+p.As+" owns objects in "+warehouse+", where the provider made nothing for it; not dropped: drop them "+
		"or give them another owner there (REASSIGN OWNED BY "+p.As+" TO ...)")
	is.Equal(tables(), 3) // the operator's tables stay
	var dbs int
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", p.As).Scan(&dbs))
	is.Equal(dbs, 1) // and so does its own database, until the role can go

	e.exec(warehouse, "REASSIGN OWNED BY "+p.As+" TO CURRENT_USER")
	is.NoErr(e.b.Drop(ctx, p.As)) // then it finishes: its grants there revoked
	is.Equal(tables(), 3)
	is.Equal(e.role(p.As), "")
}

// Issue 28, case 7c: two consumers naming one database, created at once, never meet the
// server's raw unique violation: the one that does not get it is refused, naming the other.
func TestTwoConsumersCreatedAtOnceNamingOneDatabase(t *testing.T) {
	for range 4 {
		is := is.New(t)
		e := newEnv(t)
		db := name("shared")
		a, b := provision(name("a")), provision(name("b"))
		a.Derived["database"], b.Derived["database"] = db, db
		t.Cleanup(func() { e.exec("", "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)") })
		errs := make(chan error, 2)
		for _, p := range []ports.Provision{a, b} {
			go func() { errs <- errOf(e.b.Create(ctx, p)) }()
		}
		err1, err2 := <-errs, <-errs
		is.True((err1 == nil) != (err2 == nil)) // one has it
		err := errors.Join(err1, err2)
		is.True(errors.Is(err, ports.ErrRefused)) // the other is refused
		var owner string
		is.NoErr(e.admin("").QueryRow(ctx, "SELECT pg_get_userbyid(datdba)::text FROM pg_database WHERE datname = $1", db).Scan(&owner))
		other := map[string]string{a.As: b.As, b.As: a.As}[owner]
		is.Equal(err.Error(), "create database "+db+": consumer "+owner+" has it; one database is never given to two consumers") // naming it
		is.True(!strings.Contains(err.Error(), "23505"))
		_, ok := listed(t, e.b, other)
		is.True(!ok || e.b.Drop(ctx, other) == nil) // raced past the first look, its role is the provider's to drop
	}
}
