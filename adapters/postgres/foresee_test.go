package postgres_test

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/ports"
)

// planOn is a Backend on url whose every session the server keeps read-only, as provisioner
// plan runs one, with the server read first (its mode).
func (e *env) planOn(url string) *postgres.Backend {
	e.t.Helper()
	plan := e.backendWith(postgres.Config{URL: url, ReadOnly: true})
	_, err := plan.Managed(ctx)
	is.New(e.t).NoErr(err) // the plan's Backend reads the server
	return plan
}

// A Backend whose every session the server keeps read-only (what provisioner plan runs on)
// foresees each act, with Create's reasons, and writes nothing.
func TestForeseeOnAReadOnlyBackendNamesEachAct(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	plan := e.planOn(e.srv.URL)

	fresh, held, limited, plain, super, squatted := provision(name("fresh"), "pg_trgm"), provision(name("held"), "pg_trgm"),
		provision(name("limited")), provision(name("plain")), provision(name("super")), provision(name("squat"))
	e.mustCreate(held)
	e.mustCreate(limited)
	e.exec("", `ALTER ROLE "`+limited.As+`" CONNECTION LIMIT 3`) // behind the provider's back
	e.exec("", `CREATE ROLE "`+plain.As+`" LOGIN`)
	e.exec("", `CREATE ROLE "`+super.As+`" LOGIN SUPERUSER`)
	e.exec("", `CREATE DATABASE "`+squatted.As+`"`) // owned by the server's superuser
	t.Cleanup(func() {
		e.exec("", `DROP ROLE IF EXISTS "`+plain.As+`"`, `DROP ROLE IF EXISTS "`+super.As+`"`, `DROP DATABASE IF EXISTS "`+squatted.As+`"`)
	})
	bad := provision("pg_bad")

	before := e.catalog()
	seen := plan.Foresee(ctx, []ports.Provision{fresh, held, limited, plain, super, squatted, bad}, 30*time.Second)
	is.Equal(e.catalog(), before) // nothing made, nothing dropped
	acts := make([]ports.Act, len(seen))
	for i, f := range seen {
		is.NoErr(f.Err) // every one could be looked at
		acts[i] = f.Act
	}
	is.Equal(acts, []ports.Act{ports.ActCreate, ports.ActNone, ports.ActRepair, ports.ActAdopt, ports.ActRefuse, ports.ActRefuse, ports.ActRefuse})
	is.Equal(seen[2].Why, []string{"connection limit"})                            // the drift words
	is.True(slices.Contains(seen[3].Why, "comment (the record)"))                  // what adoption writes
	is.True(slices.Contains(seen[3].Why, "password"))                              // and changes
	is.True(strings.Contains(seen[4].Why[0], "a superuser; it is not taken over")) // Create's reason
	is.True(strings.Contains(seen[5].Why[0], "not handed over"))
	is.True(strings.Contains(seen[6].Why[0], "reserved")) // the name's check

	// The same reasons as Create's own errors, which the read-write Backend then meets.
	_, err := e.b.Create(ctx, super)
	is.True(errors.Is(err, ports.ErrRefused))
	is.Equal(err.Error(), seen[4].Why[0])
	_, err = e.b.Create(ctx, squatted)
	is.True(errors.Is(err, ports.ErrRefused))
	is.Equal(err.Error(), seen[5].Why[0])

	_, err = plan.Create(ctx, fresh)
	is.True(err != nil) // the server refuses a plan's Backend any write
}

// A plan reads each consumer once: one round trip observes all of them, whatever Create would
// do with each (make it, leave it, repair it), and their checks weigh what it read; a role the
// provider may adopt is read again, alone, as Create reads it (what it holds across the
// cluster). Counted in the server's log, where each observation names the consumers it reads
// among its parameters, beside the search_path the provider gives them.
func TestAPlanReadsEachConsumerOnce(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	if e.srv.Local == nil {
		t.Skip("the server's log can be read only for a server these tests started")
	}
	held, fresh, limited, plain := provision(name("once_held"), "pg_trgm"), provision(name("once_fresh"), "pg_trgm"),
		provision(name("once_limited")), provision(name("once_plain"))
	e.mustCreate(held)
	e.mustCreate(limited)
	e.exec("", `ALTER ROLE "`+limited.As+`" CONNECTION LIMIT 3`)
	e.exec("", `CREATE ROLE "`+plain.As+`" LOGIN`)
	t.Cleanup(func() { e.exec("", `DROP ROLE IF EXISTS "`+plain.As+`"`) })

	from := e.logSize()
	seen := e.b.Foresee(ctx, []ports.Provision{held, fresh, limited, plain}, 30*time.Second)
	acts := make([]ports.Act, len(seen))
	for i, f := range seen {
		is.NoErr(f.Err)
		acts[i] = f.Act
	}
	is.Equal(acts, []ports.Act{ports.ActNone, ports.ActCreate, ports.ActRepair, ports.ActAdopt})

	raw, err := e.srv.Local.Log()
	is.NoErr(err)
	reads := func(role string) int { // the observations whose parameters name role
		n := 0
		named := regexp.MustCompile(`[{,]` + regexp.QuoteMeta(role) + `[,}]`)
		for _, line := range strings.Split(string(raw[from:]), "\n") {
			// "parameters:" up to PostgreSQL 16, "Parameters:" from 17 (its DETAIL lines begin in capitals)
			if strings.Contains(strings.ToLower(line), "parameters: $1 = ") && strings.Contains(line, `"$user", public, extensions`) && named.MatchString(line) {
				n++
			}
		}
		return n
	}
	is.Equal(reads(held.As), 1)
	is.Equal(reads(fresh.As), 1)
	is.Equal(reads(limited.As), 1)
	is.Equal(reads(plain.As), 2) // with the others, then alone, with what it holds
}

// TestCreateDoesWhatForeseeSaid: for each way a consumer can be found, Create names the act
// Foresee named, with the same words where it refuses, and a refusal makes nothing: both take
// their answer from one verdict.
func TestCreateDoesWhatForeseeSaid(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	plan := e.planOn(e.srv.URL)

	fresh, held, limited, plain, super, squatted, settled, taken, renamed := provision(name("fresh")), provision(name("held")),
		provision(name("limited")), provision(name("plain")), provision(name("super")), provision(name("squat")),
		provision(name("settled")), provision(name("taken")), provision(name("renamed"))
	schemed := provision(name("schemed"))
	settled = withSettings(settled, map[string]any{"work_mem": "not-a-size"})
	e.mustCreate(held)
	e.mustCreate(limited)
	e.mustCreate(renamed)
	e.mustCreate(schemed)
	// The consumer makes a schema named as the provider's, to plant objects in, and then names
	// an extension: nothing is made inside its database, and the plan says so in Create's words.
	_, err := e.mustLogin(schemed.As, schemed.Password, schemed.As).Exec(ctx, "CREATE SCHEMA extensions")
	is.NoErr(err)
	schemed.Values["extensions"] = []any{"pg_trgm"}
	e.exec("", `ALTER ROLE "`+limited.As+`" CONNECTION LIMIT 3`)
	e.exec("", `CREATE ROLE "`+plain.As+`" LOGIN`, `CREATE ROLE "`+super.As+`" LOGIN SUPERUSER`, `CREATE DATABASE "`+squatted.As+`"`)
	e.exec("", `ALTER ROLE "`+renamed.As+`" RENAME TO "`+renamed.As+`_old"`)
	taken.Derived["database"] = held.As // another consumer's

	// A role's databases go before it; the renamed role, which carries a record, goes too, or
	// the other tests' Managed would name it.
	t.Cleanup(func() {
		e.exec("", `DROP DATABASE IF EXISTS "`+plain.As+`"`, `DROP ROLE IF EXISTS "`+plain.As+`"`, `DROP ROLE IF EXISTS "`+super.As+`"`,
			`DROP DATABASE IF EXISTS "`+squatted.As+`"`, `DROP DATABASE IF EXISTS "`+renamed.As+`"`, `DROP ROLE IF EXISTS "`+renamed.As+`_old"`)
	})
	ps := []ports.Provision{fresh, held, limited, plain, super, squatted, settled, taken, renamed, schemed}
	seen := plan.Foresee(ctx, ps, 30*time.Second)
	wantActs := []ports.Act{ports.ActCreate, ports.ActNone, ports.ActRepair, ports.ActAdopt, ports.ActRefuse, ports.ActRefuse,
		ports.ActRefuse, ports.ActRefuse, ports.ActRefuse, ports.ActRefuse}
	for i, p := range ps {
		is.NoErr(seen[i].Err)
		is.Equal(seen[i].Act, wantActs[i]) // what the plan says
		before := e.catalog()
		did, err := e.b.Create(ctx, p)
		if seen[i].Act == ports.ActRefuse {
			is.True(err != nil)
			is.Equal(err.Error(), seen[i].Why[0]) // the same words
			is.Equal(did, ports.ActRefuse)
			is.Equal(e.catalog(), before) // and nothing made
			continue
		}
		is.NoErr(err)
		is.Equal(did, seen[i].Act) // what the pass does
	}
}

// TestAPlanFindsTheRecordsCreateFinds: a plan reads which roles' records name its consumers'
// logins once for all of them, where Create searches every record for its one consumer's
// login; for a record moved to another role in each way a hand could leave one (as written, on
// two roles, with the login named twice either way round, spaced), both find the same, and so
// Create names the act the plan named, in its words, and the same role. A record spaced by
// hand is found by neither: both look for the login as the provider writes it.
func TestAPlanFindsTheRecordsCreateFinds(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	plan := e.planOn(e.srv.URL)
	model := provision(name("model"))
	e.mustCreate(model)
	var record string
	is.NoErr(e.admin("").QueryRow(ctx, `SELECT pg_catalog.shobj_description(oid, 'pg_authid') FROM pg_catalog.pg_roles WHERE rolname = $1`,
		model.As).Scan(&record))
	login := func(as string) string { return `"login":"` + as + `"` }
	is.True(strings.Count(record, login(model.As)) == 1 && strings.Contains(record, `"state":"active"`)) // the record as this test takes it

	asWritten := func(r, as string) string { return r }
	cases := []struct {
		what string
		edit func(record, as string) string
		on   []string // the roles, after the consumer's login, that carry the record
		want ports.Act
	}{
		{"as written", asWritten, []string{"_old"}, ports.ActRefuse},
		{"on two roles", asWritten, []string{"_old", "_also"}, ports.ActRefuse}, // the first by name is said
		{"named last of two", func(r, as string) string { return strings.Replace(r, "{", `{"login":"someone_else",`, 1) },
			[]string{"_old"}, ports.ActRefuse},
		{"named first of two", func(r, as string) string {
			return strings.Replace(r, `"state":"active"`, `"state":"active","login":"someone_else"`, 1)
		}, []string{"_old"}, ports.ActCreate},
		{"spaced", func(r, as string) string { return strings.Replace(r, login(as), `"login": "`+as+`"`, 1) },
			[]string{"_old"}, ports.ActCreate},
	}
	var ps []ports.Provision
	for _, c := range cases {
		p := provision(name("moved"))
		ps = append(ps, p)
		for _, suffix := range c.on {
			e.exec("", `CREATE ROLE "`+p.As+suffix+`"`,
				`COMMENT ON ROLE "`+p.As+suffix+`" IS `+quoteLiteral(c.edit(strings.Replace(record, login(model.As), login(p.As), 1), p.As)))
			t.Cleanup(func() { e.exec("", `DROP ROLE IF EXISTS "`+p.As+suffix+`"`) }) // or the other tests' Managed would name it
		}
	}
	seen := plan.Foresee(ctx, ps, 30*time.Second)
	for i, p := range ps {
		is.NoErr(seen[i].Err)
		if seen[i].Act != cases[i].want {
			t.Fatalf("%s: the plan says %v, want %v (%v)", cases[i].what, seen[i].Act, cases[i].want, seen[i].Why)
		}
		did, err := e.b.Create(ctx, p)
		is.Equal(did, seen[i].Act) // what the pass does
		if seen[i].Act == ports.ActRefuse {
			is.True(err != nil)
			is.Equal(err.Error(), seen[i].Why[0])                                                      // in the same words
			is.True(strings.Contains(seen[i].Why[0], "is now the role "+p.As+slices.Min(cases[i].on))) // naming the same role
			continue
		}
		is.NoErr(err)
	}
}

// TestAPlanGoesPastDriftToWhatCreateRefusesInside: where the catalog finds drift (a
// connection limit) or a login finds a stale password, a check stops, as a create is due; a
// plan goes on into the consumer's database, so that it names the refusal Create meets there,
// in its words, with what the consumer lacks, and otherwise what Create makes there besides.
func TestAPlanGoesPastDriftToWhatCreateRefusesInside(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	plan := e.planOn(e.srv.URL)

	// The consumer makes a schema named as the provider's, and its role drifts.
	squatted, grown := provision(name("squat")), provision(name("grown"))
	e.mustCreate(squatted)
	e.mustCreate(grown)
	_, err := e.mustLogin(squatted.As, squatted.Password, squatted.As).Exec(ctx, "CREATE SCHEMA extensions")
	is.NoErr(err)
	e.exec("", `ALTER ROLE "`+squatted.As+`" CONNECTION LIMIT 3`, `ALTER ROLE "`+grown.As+`" CONNECTION LIMIT 3`)
	squatted.Values["extensions"] = []any{"pg_trgm", "no_such_extension"}
	grown.Values["extensions"] = []any{"pg_trgm"}

	seen := plan.Foresee(ctx, []ports.Provision{squatted, grown}, 30*time.Second)
	is.NoErr(seen[0].Err)
	is.NoErr(seen[1].Err)
	is.Equal(seen[0].Act, ports.ActRefuse) // not a repair of its limit
	is.Equal(len(seen[0].Lacks), 1)        // and what it lacks besides
	is.True(strings.Contains(seen[0].Lacks[0], "no_such_extension"))
	is.Equal(seen[1].Act, ports.ActRepair)
	is.True(slices.Contains(seen[1].Why, "connection limit"))          // the catalog's drift
	is.True(slices.Contains(seen[1].Why, "extension pg_trgm missing")) // and what Create makes inside
	held, err := holdsOne(ctx, e.b, squatted)
	is.NoErr(err)
	is.Equal(held.Drift, []string{"connection limit"}) // a check stops there: a create is due either way

	_, err = e.b.Create(ctx, squatted)
	is.True(errors.Is(err, ports.ErrRefused))
	is.Equal(err.Error(), seen[0].Why[0]) // the same words
	held, err = holdsOne(ctx, e.b, squatted)
	is.NoErr(err)
	is.True(!slices.Contains(held.Drift, "connection limit")) // its role repaired before the refusal inside
	did, err := e.b.Create(ctx, grown)
	is.NoErr(err)
	is.Equal(did, ports.ActRepair)
	is.True(slices.Contains(e.extensions(grown.As), "pg_trgm"))

	// A provider that checks passwords by logging in: the consumer changed its own, and made
	// the schema.
	d, prov := e.delegated()
	dplan := e.planOn(e.urlAs(prov, "prov-pw"))
	stale := provision(name("stale"))
	_, err = d.Create(ctx, stale)
	is.NoErr(err)
	conn := e.mustLogin(stale.As, stale.Password, stale.As)
	_, err = conn.Exec(ctx, "CREATE SCHEMA extensions")
	is.NoErr(err)
	_, err = conn.Exec(ctx, "ALTER ROLE CURRENT_USER PASSWORD 'their-own'")
	is.NoErr(err)
	stale.Values["extensions"] = []any{"pg_trgm"}
	seen = dplan.Foresee(ctx, []ports.Provision{stale}, 30*time.Second)
	is.NoErr(seen[0].Err)
	is.Equal(seen[0].Act, ports.ActRefuse) // not a repair of its password
	_, err = d.Create(ctx, stale)
	is.True(errors.Is(err, ports.ErrRefused))
	is.Equal(err.Error(), seen[0].Why[0])

	// Where the look inside cannot be made (the database takes no connection of a provider
	// that is not a superuser), the plan says the drift, as it did.
	shut := provision(name("shut"))
	_, err = d.Create(ctx, shut)
	is.NoErr(err)
	e.exec("", `ALTER ROLE "`+shut.As+`" CONNECTION LIMIT 3`, `ALTER DATABASE "`+shut.As+`" CONNECTION LIMIT 0`)
	shut.Values["extensions"] = []any{"pg_trgm"}
	seen = dplan.Foresee(ctx, []ports.Provision{shut}, 30*time.Second)
	is.NoErr(seen[0].Err)
	is.Equal(seen[0].Act, ports.ActRepair)
	is.Equal(seen[0].Why, []string{"connection limit"})
}

// TestAPlanSaysWhatANewConsumerWouldLackOrBeRefused: of a consumer whose role and database
// Create is yet to make, a plan says what it would lack, and refuses, in Create's words, one
// naming an extension whose control file puts it in a schema the provider does not own.
func TestAPlanSaysWhatANewConsumerWouldLackOrBeRefused(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	plan := e.planOn(e.srv.URL)
	fixed := "novox_fixed_" + run
	e.srv.InstallExtension(e.t, map[string]string{
		fixed + ".control":  "comment = 'fixed in schema public, for the tests of the provider'\ndefault_version = '1.0'\nschema = public\nsuperuser = true\n",
		fixed + "--1.0.sql": "CREATE FUNCTION " + fixed + "_one() RETURNS int LANGUAGE sql AS 'SELECT 1';\n",
	})
	lacking, placed := provision(name("lacking"), "pg_trgm", "no_such_extension"), provision(name("placed"), "pg_trgm", fixed)

	seen := plan.Foresee(ctx, []ports.Provision{lacking, placed}, 30*time.Second)
	is.NoErr(seen[0].Err)
	is.NoErr(seen[1].Err)
	is.Equal(seen[0].Act, ports.ActCreate)
	is.Equal(len(seen[0].Lacks), 1) // what it would lack
	is.True(strings.Contains(seen[0].Lacks[0], "no_such_extension"))
	is.Equal(seen[1].Act, ports.ActRefuse) // not a create

	did, err := e.b.Create(ctx, lacking)
	is.Equal(did, ports.ActCreate)
	var incomplete *ports.Incomplete
	is.True(errors.As(err, &incomplete))
	is.Equal(incomplete.Lacks, seen[0].Lacks) // as the plan said
	_, err = e.b.Create(ctx, placed)
	is.True(errors.Is(err, ports.ErrRefused))
	is.Equal(err.Error(), seen[1].Why[0]) // in its words
	is.True(!slices.Contains(e.extensions(placed.As), fixed))
}

// BenchmarkForesee is a plan's question of the server: 1,000 consumers of which nothing exists
// (every one looked at in the read-only transaction, none checked), and 20 that exist, with
// pg_trgm (looked at, then checked as a verify pass checks them).
func BenchmarkForesee(b *testing.B) {
	e := newEnv(b)
	plan := e.planOn(e.srv.URL)
	fresh := make([]ports.Provision, 1000)
	for i := range fresh {
		fresh[i] = provision(name("nothing"))
	}
	made := make([]ports.Provision, 20)
	for i := range made {
		made[i] = provision(name("made"), "pg_trgm")
		e.mustCreate(made[i])
	}
	for _, c := range []struct {
		name string
		ps   []ports.Provision
	}{{"1000 new", fresh}, {"20 made", made}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				for _, f := range plan.Foresee(ctx, c.ps, 30*time.Second) {
					if f.Err != nil {
						b.Fatal(f.Err)
					}
				}
			}
		})
	}
}
