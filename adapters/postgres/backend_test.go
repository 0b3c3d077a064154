package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/matryer/is"

	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/ports"
	"github.com/novox/postgres-provider/tests/backendtest"
)

func sqlstate(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

func TestLettaGetsTheUntrustedExtensionItCannotCreate(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	letta := provision(name("letta"))
	e.mustCreate(letta) // as before: a login and a database, no extensions

	conn := e.mustLogin(letta.As, letta.Password, letta.As)
	_, err := conn.Exec(ctx, "CREATE EXTENSION dblink")
	is.Equal(sqlstate(err), "42501") // the bug: the consumer's own role may not create an untrusted extension

	letta.Values["extensions"] = []any{"dblink"}
	e.mustCreate(letta)
	conn = e.mustLogin(letta.As, letta.Password, letta.As) // a real SCRAM handshake with the minted password
	var n int
	is.NoErr(conn.QueryRow(ctx, "SELECT count(*) FROM pg_extension WHERE extname = 'dblink'").Scan(&n))
	is.Equal(n, 1) // dblink is there for letta
	is.True(e.holds(letta))
}

func TestLettaUsesTheVectorType(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	if !e.available("vector") {
		t.Skip("no extension named vector on this server, and its extension folder could not be written")
	}
	var version, comment string
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT default_version, coalesce(comment, '') FROM pg_available_extensions WHERE name = 'vector'").Scan(&version, &comment))
	letta := provision(name("letta"), "vector", "pg_trgm")
	e.mustCreate(letta)
	conn := e.mustLogin(letta.As, letta.Password, letta.As)
	is.Equal(e.extensions(letta.As), []string{"pg_trgm", "plpgsql", "vector"})

	if strings.Contains(comment, "stand-in for pgvector") {
		t.Logf("vector is the tests' stand-in (%s): only its type is there to use", version)
		_, err := conn.Exec(ctx, "CREATE TABLE memories (id int PRIMARY KEY, embedding vector)")
		is.NoErr(err) // type "vector" exists for letta
		_, err = conn.Exec(ctx, "INSERT INTO memories VALUES (1, '{0.5, 1.5}')")
		is.NoErr(err)
		return
	}
	t.Logf("vector is pgvector %s", version)
	for _, sql := range []string{
		"CREATE TABLE memories (id int PRIMARY KEY, embedding vector(3))",
		"INSERT INTO memories VALUES (1, '[1,0,0]'), (2, '[0,1,0]'), (3, '[0,0,1]'), (4, '[0.9,0.2,0]')",
		"CREATE INDEX memories_hnsw ON memories USING hnsw (embedding vector_l2_ops)",
		"SET enable_seqscan = off", // four rows: only then does the planner take the index
	} {
		_, err := conn.Exec(ctx, sql)
		is.NoErr(err) // letta uses pgvector's type, operators and index method
	}
	const nearest = "SELECT id FROM memories ORDER BY embedding <-> '[1,0.1,0]' LIMIT 2"
	rows, _ := conn.Query(ctx, "EXPLAIN "+nearest)
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	is.NoErr(err)
	is.True(strings.Contains(strings.Join(plan, "\n"), "Index Scan using memories_hnsw")) // the nearest-neighbour query goes through the hnsw index
	rows, _ = conn.Query(ctx, nearest)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	is.NoErr(err)
	is.Equal(ids, []int{1, 4}) // the two nearest, nearest first
}

func TestUnavailableExtensionIsSkippedAndSaid(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	letta := provision(name("letta"), "no_such_extension", "pg_trgm")
	lacks := []string{"extension no_such_extension: not available on this server"}
	var incomplete *ports.Incomplete
	is.True(errors.As(errOf(e.b.Create(ctx, letta)), &incomplete)) // the rest was made: not a failure, and not whole
	is.Equal(incomplete.Lacks, lacks)
	is.Equal(e.log.said(), []string{letta.As + ": extension no_such_extension is not available on this server; skipped"})
	is.Equal(e.extensions(letta.As), []string{"pg_trgm", "plpgsql"}) // the available one was created
	h, err := holdsOne(ctx, e.b, letta)
	is.NoErr(err)
	is.True(h.Held)          // held without the missing one: applying again would not make it
	is.Equal(h.Lacks, lacks) // and the check says what it lacks
	f := e.b.Foresee(ctx, []ports.Provision{letta}, time.Minute)[0]
	is.NoErr(f.Err)
	is.Equal(f.Act, ports.ActNone)
	is.Equal(f.Lacks, lacks) // as the plan says it
}

func TestHoldsSeesDriftAndCreateRepairsIt(t *testing.T) {
	cases := []struct {
		name     string
		sabotage func(e *env, p ports.Provision) // behind the provider's back
	}{
		{"password changed", func(e *env, p ports.Provision) { e.exec("", "ALTER ROLE "+p.As+" PASSWORD 'someone else''s'") }},
		{"password stored as md5 of another", func(e *env, p ports.Provision) {
			e.exec("", "SET password_encryption = 'md5'", "ALTER ROLE "+p.As+" PASSWORD 'other'")
		}},
		{"login revoked", func(e *env, p ports.Provision) { e.exec("", "ALTER ROLE "+p.As+" NOLOGIN") }},
		{"superuser granted", func(e *env, p ports.Provision) { e.exec("", "ALTER ROLE "+p.As+" SUPERUSER") }},
		{"createdb granted", func(e *env, p ports.Provision) { e.exec("", "ALTER ROLE "+p.As+" CREATEDB") }},
		{"expired", func(e *env, p ports.Provision) { e.exec("", "ALTER ROLE "+p.As+" VALID UNTIL '2000-01-01'") }},
		{"database dropped", func(e *env, p ports.Provision) { e.exec("", "DROP DATABASE "+p.As+" WITH (FORCE)") }},
		{"database given away", func(e *env, p ports.Provision) {
			e.exec("", "CREATE ROLE "+p.As+"_other", "ALTER DATABASE "+p.As+" OWNER TO "+p.As+"_other")
		}},
		{"opened to everyone", func(e *env, p ports.Provision) { e.exec("", "GRANT CONNECT ON DATABASE "+p.As+" TO PUBLIC") }},
		{"extension dropped", func(e *env, p ports.Provision) { e.exec(p.As, "DROP EXTENSION pg_trgm") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t)
			p := provision(name("drift"), "pg_trgm")
			e.mustCreate(p)
			is.True(e.holds(p)) // held as created

			c.sabotage(e, p)
			is.True(!e.holds(p)) // the drift is seen

			if c.name == "database given away" {
				// Never handed back either: the create says whose it is, and the check stays false.
				err := errOf(e.b.Create(ctx, p))
				is.True(err != nil && strings.Contains(err.Error(), fmt.Sprintf("owned by %q", p.As+"_other"))) // names the owner
				e.exec("", "ALTER DATABASE "+p.As+" OWNER TO "+p.As)
			}
			e.mustCreate(p)
			is.True(e.holds(p)) // repaired
			e.mustLogin(p.As, p.Password, p.As)
		})
	}
}

func TestHoldsVerifiesAnMD5Password(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	if m := e.major(); m >= 18 {
		t.Skipf("PostgreSQL %d deprecates md5 passwords: one is drift there (TestOn18AnMD5PasswordIsDriftAndGetsAVerifier)", m)
	}
	p := provision(name("md5"))
	e.mustCreate(p)
	e.exec("", "SET password_encryption = 'md5'", "ALTER ROLE "+p.As+" PASSWORD '"+p.Password+"'")
	var stored string
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT rolpassword FROM pg_authid WHERE rolname = $1", p.As).Scan(&stored))
	is.True(strings.HasPrefix(stored, "md5")) // the server stores md5 now
	is.True(e.holds(p))                       // and it verifies against the minted password
}

func TestHoldsMakesNoWrites(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	// A Backend whose every transaction is read-only: any write it tried would fail.
	readOnly := e.backend(e.srv.URL + "&default_transaction_read_only=on")
	p := provision(name("ro"), "pg_trgm")

	is.True(errOf(readOnly.Create(ctx, p)) != nil) // the read-only server refuses a write, so the check below can bite
	e.mustCreate(p)
	held, err := holdsOne(ctx, readOnly, p)
	is.NoErr(err) // no statement of the check writes
	is.True(held.Held)
	e.exec(p.As, "DROP EXTENSION pg_trgm")
	held, err = holdsOne(ctx, readOnly, p)
	is.NoErr(err)
	is.True(!held.Held) // still sees drift, read-only
}

func TestAnotherConsumerCannotConnect(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	letta, other := provision(name("letta")), provision(name("other"))
	e.mustCreate(letta)
	e.mustCreate(other)
	_, err := e.login(other.As, other.Password, letta.As)
	is.Equal(sqlstate(err), "42501") // no CONNECT on letta's database
	e.mustLogin(other.As, other.Password, other.As)
}

func TestRemoveRetainKeepsTheDataAndTakesTheLogin(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	letta := provision(name("letta"))
	e.mustCreate(letta)
	conn := e.mustLogin(letta.As, letta.Password, letta.As)
	_, err := conn.Exec(ctx, "CREATE TABLE notes AS SELECT g AS id FROM generate_series(1, 1000) g")
	is.NoErr(err)
	session := e.mustLogin(letta.As, letta.Password, letta.As)

	is.NoErr(e.b.Remove(ctx, letta.As))
	_, err = e.login(letta.As, letta.Password, letta.As)
	is.True(err != nil) // letta can no longer log in
	_, err = session.Exec(ctx, "SELECT 1")
	is.True(err != nil) // and its open session was ended
	var rows int
	is.NoErr(e.admin(letta.As).QueryRow(ctx, "SELECT count(*) FROM notes").Scan(&rows))
	is.Equal(rows, 1000)                     // every row kept
	is.NoErr(e.b.Remove(ctx, letta.As))      // again: idempotent
	is.NoErr(e.b.Remove(ctx, name("never"))) // and for a role that never was

	e.mustCreate(letta)
	conn = e.mustLogin(letta.As, letta.Password, letta.As) // the login is back
	is.NoErr(conn.QueryRow(ctx, "SELECT count(*) FROM notes").Scan(&rows))
	is.Equal(rows, 1000) // with the data intact
}

func TestRemoveDropLeavesNothing(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	letta := provision(name("letta"), "pg_trgm")
	letta.Derived = map[string]any{"database": letta.As + "_db"}
	e.mustCreate(letta)
	session := e.mustLogin(letta.As, letta.Password, letta.As+"_db")

	is.NoErr(e.b.Drop(ctx, letta.As))
	_, err := session.Exec(ctx, "SELECT 1")
	is.True(err != nil) // its session was ended
	var left int
	is.NoErr(e.admin("").QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_roles WHERE rolname = $1)
		+ (SELECT count(*) FROM pg_database WHERE datname = $2)`, letta.As, letta.As+"_db").Scan(&left))
	is.Equal(left, 0)                 // no role, no database
	is.NoErr(e.b.Drop(ctx, letta.As)) // again: idempotent
}

func TestRemoveDropFindsTheDatabaseWithoutDerived(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	letta := provision(name("letta"))
	letta.Values["name"] = letta.As + "_wanted"
	e.mustCreate(letta)
	is.NoErr(e.b.Drop(ctx, letta.As)) // the database was named by values, which Remove is not told
	var left int
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", letta.As+"_wanted").Scan(&left))
	is.Equal(left, 0) // found as the role's own database and dropped
}

func TestHostileNamesAreRefusedBeforeAnySQL(t *testing.T) {
	long := strings.Repeat("a", 64)
	cases := []struct {
		name   string
		change func(p *ports.Provision)
		says   string
	}{
		{"quote in login", func(p *ports.Provision) { p.As = `let"ta` }, `login "let\"ta": only letters, digits, _ and - are allowed, not '"'`},
		{"semicolon in login", func(p *ports.Provision) { p.As = "letta;DROP ROLE postgres" }, `login "letta;DROP ROLE postgres": only letters, digits, _ and - are allowed, not ';'`},
		{"space in login", func(p *ports.Provision) { p.As = "let ta" }, `login "let ta": only letters, digits, _ and - are allowed, not ' '`},
		{"NUL in login", func(p *ports.Provision) { p.As = "let\x00ta" }, `login "let\x00ta": only letters, digits, _ and - are allowed, not '\x00'`},
		{"64 bytes", func(p *ports.Provision) { p.As = long }, fmt.Sprintf("login %q: 64 bytes, at most 63", long)},
		{"pg_ prefix", func(p *ports.Provision) { p.As = "pg_x" }, `login "pg_x": names starting with pg_ are reserved`},
		{"postgres", func(p *ports.Provision) { p.As = "postgres" }, `login "postgres": the name is reserved`},
		{"template1 database", func(p *ports.Provision) { p.Values["name"] = "template1" }, `database "template1": the name is reserved`},
		{"quote in database", func(p *ports.Provision) { p.Derived["database"] = "x'; DROP DATABASE postgres; --" }, `database "x'; DROP DATABASE postgres; --": only letters, digits, _ and - are allowed, not '\''`},
		{"database not a string", func(p *ports.Provision) { p.Values["name"] = 42.0 }, "values.name is float64, not a string"},
		{"hostile extension", func(p *ports.Provision) { p.Values["extensions"] = []any{"dblink; DROP ROLE x"} }, `extension "dblink; DROP ROLE x": only letters, digits, _ and - are allowed, not ';'`},
		{"extensions not a list", func(p *ports.Provision) { p.Values["extensions"] = "vector" }, "values.extensions is string, not a list"},
		{"empty password", func(p *ports.Provision) { p.Password = "" }, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t)
			p := provision(name("hostile"), "pg_trgm")
			c.change(&p)
			before := e.catalog()
			err := errOf(e.b.Create(ctx, p))
			is.True(err != nil) // refused
			if c.says != "" {
				is.Equal(err.Error(), c.says) // a clear error
			}
			_, err = holdsOne(ctx, e.b, p)
			is.True(err != nil || c.says == "") // the check refuses it too
			is.Equal(e.catalog(), before)       // the server's roles and databases unchanged
		})
	}
}

func TestExistingDatabaseOfAnotherRoleIsNotHandedOver(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := provision(name("taken"))
	e.exec("", "CREATE ROLE "+p.As+"_bob", "CREATE DATABASE "+p.As+" OWNER "+p.As+"_bob")
	err := errOf(e.b.Create(ctx, p))
	is.True(err != nil)
	is.Equal(err.Error(), fmt.Sprintf("create database %s: the database exists and is owned by %q, not %q; it is not handed over", p.As, p.As+"_bob", p.As))
	var owner string
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = $1", p.As).Scan(&owner))
	is.Equal(owner, p.As+"_bob") // still bob's
	is.True(!strings.Contains(err.Error(), p.Password))
}

func TestPasswordNeverReachesTheServerLog(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	if e.srv.Local == nil {
		t.Skip("the server's log can be read only for a server these tests started")
	}
	from := e.logSize()
	p := provision(name("secret"), "pg_trgm")
	p.Password = "Zq7-never-logged-" + randomHex(8)
	e.mustCreate(p)
	e.mustCreate(p) // again: the role exists, so it is altered
	is.True(e.holds(p))
	e.mustLogin(p.As, p.Password, p.As)
	is.NoErr(e.b.Remove(ctx, p.As))
	e.exec("", "SELECT 'the log is written: "+p.As+"'")

	raw, err := e.srv.Local.Log()
	is.NoErr(err)
	log := string(raw[from:])
	is.True(strings.Contains(log, "the log is written: "+p.As)) // log_statement=all is on
	is.True(strings.Contains(log, "pg_try_advisory_lock"))      // and caught the provider's statements
	is.True(!strings.Contains(log, p.Password))                 // never the password
	is.True(!strings.Contains(log, "SCRAM-SHA-256$"))           // nor even its verifier
}

func TestPasswordNeverReachesPgStatStatements(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	var loaded bool
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT 'pg_stat_statements' = ANY(string_to_array(current_setting('shared_preload_libraries'), ','))").Scan(&loaded))
	if !loaded {
		t.Skip("pg_stat_statements is not loaded on this server")
	}
	// From nothing: other tests put verifiers in statements of their own (the 20,000 roles'
	// DO block), and with -count they are there when this runs again.
	e.exec("", "CREATE EXTENSION IF NOT EXISTS pg_stat_statements", "SELECT pg_stat_statements_reset()")
	p := provision(name("pgss"))
	e.mustCreate(p)
	e.mustCreate(p)
	e.exec("", "ALTER ROLE "+p.As+" VALID UNTIL 'infinity'") // a utility statement of ours is tracked
	var ours, secret int
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT count(*) FILTER (WHERE query LIKE '%VALID UNTIL%' AND query LIKE '%'||$1||'%'), "+
		"count(*) FILTER (WHERE query LIKE '%SCRAM-SHA-256$%' OR query LIKE '%'||$2||'%') FROM pg_stat_statements", p.As, p.Password).Scan(&ours, &secret))
	is.True(ours >= 1)  // the extension tracks utility statements here, so the check can bite
	is.Equal(secret, 0) // but never the password nor its verifier
}

func TestConcurrentCreatesOfOneConsumer(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	// Each create waits for the ones before it; on a loaded machine one create took more than
	// the default lock timeout (5 s, a transient failure the loop retries), and this test is
	// about the serialising, not that timeout: every wait here may last a minute.
	cfg := postgres.Config{URL: e.srv.URL, LockTimeout: time.Minute, Timeout: 3 * time.Minute}
	one, other := e.backendWith(cfg), e.backendWith(cfg) // two providers on the same server
	p := provision(name("race"), "pg_trgm", "dblink")
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		b := one
		if i%2 == 1 {
			b = other
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = errOf(b.Create(ctx, p))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		is.NoErr(err) // every create succeeded
	}
	var roles, dbs int
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT (SELECT count(*) FROM pg_roles WHERE rolname = $1), (SELECT count(*) FROM pg_database WHERE datname = $1)", p.As).Scan(&roles, &dbs))
	is.Equal(roles, 1) // one role
	is.Equal(dbs, 1)   // one database
	is.True(e.holds(p))
	e.mustLogin(p.As, p.Password, p.As)
}

// The server's own SASLprep is the reference: a verifier the server makes from a password must
// verify under ours, and one we make must let the consumer log in.
func TestSASLprepAgreesWithTheServer(t *testing.T) {
	passwords := map[string]string{
		"ascii":             "plain-ascii-1",
		"precomposed":       "pässwörd",
		"decomposed":        "pa\u0308sswo\u0308rd",
		"ligature (NFKC)":   "\ufb01sh-and-chips",
		"non-ASCII space":   "no\u00a0break",
		"mapped to nothing": "soft\u00adhyphen",
		"right to left":     "\u05d0\u05d1\u05d2",
		// Each of these holds a ligature NFKC would change: the server keeps the raw bytes.
		"bidi broken: raw":       "\ufb01\u05d0b",
		"unassigned: raw":        "\ufb01\u0221y",
		"emoji: raw":             "\ufb01smile\U0001F600",
		"prohibited: raw":        "\ufb01ctrl\u0085",
		"empty when mapped: raw": "\u00ad\u200b",
	}
	for label, pw := range passwords {
		t.Run(label, func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t)
			p := provision(name("prep"))
			p.Password = pw
			e.mustCreate(p)
			is.True(e.holds(p)) // our verifier, our check
			e.exec("", "SET password_encryption = 'scram-sha-256'", "ALTER ROLE "+p.As+" PASSWORD '"+pw+"'")
			is.True(e.holds(p)) // the server's verifier for the same password verifies under our SASLprep
		})
	}
}

func TestErrorsWhileTheServerIsDownAreClear(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	down := e.backend("postgres://postgres:hunter2-secret@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2")
	p := provision(name("down"))
	err := errOf(down.Create(ctx, p))
	is.True(err != nil)
	is.True(strings.HasPrefix(err.Error(), "connect: ")) // says what it was doing
	is.True(!strings.Contains(err.Error(), p.Password))  // never the consumer's password
	is.True(!strings.Contains(err.Error(), "hunter2"))   // nor the provider's
	_, err = holdsOne(ctx, down, p)
	is.True(err != nil) // cannot ask is an error, not "not held"
}

func TestExtensionsGoToTheProvidersSchemaNotOneTheConsumerMade(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := provision(name("schema"))
	e.mustCreate(p)
	conn := e.mustLogin(p.As, p.Password, p.As)
	var provider string
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT current_user").Scan(&provider))
	_, err := conn.Exec(ctx, "CREATE SCHEMA "+provider) // first on the provider's "$user" search path
	is.NoErr(err)
	p.Values["extensions"] = []any{"pg_trgm"}
	e.mustCreate(p)
	var schema string
	is.NoErr(e.admin(p.As).QueryRow(ctx, "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'pg_trgm'").Scan(&schema))
	is.Equal(schema, "extensions") // the provider's, not the one the consumer made, nor public
	conn = e.mustLogin(p.As, p.Password, p.As)
	var sim float64
	is.NoErr(conn.QueryRow(ctx, "SELECT similarity('letta', 'lettuce')").Scan(&sim)) // resolves unqualified for the consumer
	_, err = conn.Exec(ctx, "CREATE FUNCTION extensions.planted() RETURNS int LANGUAGE sql AS 'SELECT 1'")
	is.Equal(sqlstate(err), "42501") // the consumer may use the schema, not create in it
}

// TestTheProvidersSchemaIsWrittenOnlyWhereItsPrivilegesDiffer: a create over a consumer that
// holds writes nothing to the schema of its extensions (its catalog row keeps its version), and
// one after an operator opened it (USAGE to PUBLIC; then CREATE to the consumer) closes it again.
// The check judges it as the create does (schemaSeen): USAGE to PUBLIC lets nobody create in it,
// and holds; CREATE to the consumer is drift.
func TestTheProvidersSchemaIsWrittenOnlyWhereItsPrivilegesDiffer(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := provision(name("schemaacl"), "pg_trgm")
	e.mustCreate(p)
	version := func() (xmin string) {
		is.NoErr(e.admin(p.As).QueryRow(ctx, "SELECT xmin::text FROM pg_namespace WHERE nspname = 'extensions'").Scan(&xmin))
		return xmin
	}
	before := version()
	e.mustCreate(p)
	is.Equal(version(), before) // as the provider left it: not written again

	e.exec(p.As, "GRANT USAGE ON SCHEMA extensions TO PUBLIC")
	is.True(e.holds(p)) // nobody may create in it: safe, as the check sees it
	e.mustCreate(p)
	var public bool
	is.NoErr(e.admin(p.As).QueryRow(ctx, "SELECT has_schema_privilege('public', 'extensions', 'USAGE')").Scan(&public))
	is.True(!public) // PUBLIC's USAGE taken back

	e.exec(p.As, "GRANT CREATE ON SCHEMA extensions TO "+p.As)
	held, err := holdsOne(ctx, e.b, p)
	is.NoErr(err)
	is.Equal(held.Drift, []string{"extensions schema"}) // the consumer may create in it: drift
	e.mustCreate(p)
	is.True(e.holds(p)) // closed again
	conn := e.mustLogin(p.As, p.Password, p.As)
	_, err = conn.Exec(ctx, "CREATE FUNCTION extensions.planted() RETURNS int LANGUAGE sql AS 'SELECT 1'")
	is.Equal(sqlstate(err), "42501") // and the consumer's CREATE
	var sim float64
	is.NoErr(conn.QueryRow(ctx, "SELECT similarity('letta', 'lettuce')").Scan(&sim)) // its USAGE kept
}

func TestASchemaNamedExtensionsTheConsumerMadeIsNotUsed(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := provision(name("squat"))
	e.mustCreate(p)
	conn := e.mustLogin(p.As, p.Password, p.As)
	_, err := conn.Exec(ctx, "CREATE SCHEMA extensions")
	is.NoErr(err)
	p.Values["extensions"] = []any{"pg_trgm"}
	err = errOf(e.b.Create(ctx, p))
	is.True(err != nil) // refused, naming whose it is
	is.True(strings.Contains(err.Error(), "schema extensions exists and is owned by "+p.As+", not by a superuser"))
	is.Equal(e.extensions(p.As), []string{"plpgsql"}) // nothing created there
	held, err := holdsOne(ctx, e.b, p)
	is.NoErr(err)
	is.True(slices.Contains(held.Drift, "extensions schema")) // and the check judges it as the create does
}

func TestAServerThatStopsAnsweringDoesNotHangCreate(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	// A listener that takes connections and never says a word: a hung server.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	is.NoErr(err)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	hung, err := postgres.New(postgres.Config{URL: "postgres://postgres:x@" + l.Addr().String() + "/postgres?sslmode=disable",
		Timeout: 300 * time.Millisecond, Log: e.logger()})
	is.NoErr(err)
	defer hung.Close()
	err = errOf(hung.Create(ctx, provision(name("hung"))))
	is.True(err != nil)                               // it gave up
	is.True(errors.Is(err, context.DeadlineExceeded)) // at its timeout
	err = hung.Remove(ctx, name("hung"))
	is.True(errors.Is(err, context.DeadlineExceeded)) // and so does Remove
}

// The adapter, opened as the daemon opens it, keeps the contract of ports.Server.
func TestServerKeepsTheContract(t *testing.T) {
	e := newEnv(t)
	backendtest.RunServer(t, e.openServer(e.srv.URL), "", func() ports.Provision { return provision(name("server")) })
}

// The adapter keeps the contract of ports.Backend.
func TestBackendKeepsTheContract(t *testing.T) {
	e := newEnv(t)
	backendtest.Run(t, e.b, func() ports.Provision { return provision(name("contract"), "pg_trgm") }, e.contractWorld(e.srv.URL, backendtest.World{
		Join: func(t *testing.T, as string) {
			e.exec("", "CREATE ROLE "+as+"_up", "CREATE ROLE "+as+"_down LOGIN", "GRANT "+as+"_up TO "+as, "GRANT "+as+" TO "+as+"_down")
		},
		Plain: func(t *testing.T, as string) { e.exec("", "CREATE ROLE "+as+" LOGIN PASSWORD 'theirs'") },
		Powerful: func(t *testing.T, as string) {
			e.exec("", "CREATE ROLE "+as+"_group", "CREATE ROLE "+as+" LOGIN PASSWORD 'theirs' IN ROLE "+as+"_group")
		},
	}))
}
