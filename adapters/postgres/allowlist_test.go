package postgres_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/ports"
	"github.com/novox/postgres-provider/tests/pgserver"
)

// The tests of delegated mode on a server that allow-lists extensions for a role that is not a
// superuser (pgextwlist), as managed services do: skipped, saying why, where the server's
// binaries have none.

// allowListingEnv is a test's view of the server preloading pgextwlist.
func allowListingEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, srv: pgserver.AllowListing(t), log: &recLogger{}}
	e.b = e.backend(e.srv.URL)
	return e
}

// extOwner is the owner of the extension ext in db.
func (e *env) extOwner(db, ext string) string {
	e.t.Helper()
	var owner string
	is.New(e.t).NoErr(e.admin(db).QueryRow(ctx, "SELECT pg_catalog.pg_get_userbyid(extowner)::text FROM pg_extension WHERE extname = $1", ext).Scan(&owner))
	return owner
}

func TestDelegatedCreatesTheExtensionsThePlatformAllowLists(t *testing.T) {
	is := is.New(t)
	e := allowListingEnv(t)
	if !e.available("vector") {
		t.Skip("no extension named vector on this server, and its extension folder could not be written")
	}
	b, prov := e.delegated()
	p := provision(name("letta"), "vector", "pg_trgm", "dblink")
	lacks := []string{`extension dblink: refused by the server (permission denied to create extension "dblink")`}
	for range 2 { // again, as every pass that repairs would
		var incomplete *ports.Incomplete
		is.True(errors.As(errOf(b.Create(ctx, p)), &incomplete)) // made without dblink
		is.Equal(incomplete.Lacks, lacks)
	}
	is.Equal(e.extensions(p.As), []string{"pg_trgm", "plpgsql", "vector"}) // the allow-listed ones; dblink is not listed
	is.Equal(e.extOwner(p.As, "vector"), "postgres")                       // made by the server's superuser for the provider, as the platform does
	var said []string
	for _, line := range e.log.said() {
		if strings.Contains(line, "extension") {
			said = append(said, line)
		}
	}
	is.Equal(len(said), 1) // one line for dblink over two creates
	is.True(strings.HasPrefix(said[0], p.As+": extension dblink is refused by the server (permission denied to create extension \"dblink\")"))
	held, err := holdsOne(ctx, b, p)
	is.NoErr(err)
	is.True(held.Held)          // the refused extension is not drift
	is.Equal(held.Lacks, lacks) // but it is lacked

	conn := e.mustLogin(p.As, p.Password, p.As)
	_, err = conn.Exec(ctx, "CREATE TABLE memories (id int PRIMARY KEY, embedding vector)")
	is.NoErr(err) // vector resolves for letta, through the provider's schema on its search path
	_, err = conn.Exec(ctx, "SELECT similarity('vector', 'vectors')")
	is.NoErr(err) // and pg_trgm's functions
	var schemaOwner string
	is.NoErr(e.admin(p.As).QueryRow(ctx, "SELECT pg_catalog.pg_get_userbyid(nspowner)::text FROM pg_namespace WHERE nspname = 'extensions'").Scan(&schemaOwner))
	is.Equal(schemaOwner, prov) // the extensions' schema is the provider's, not the consumer's

	e.exec(p.As, "DROP EXTENSION vector CASCADE") // behind the provider's back
	held, err = holdsOne(ctx, b, p)
	is.NoErr(err)
	is.True(!held.Held)                                                 // an allow-listed extension that is gone is drift
	is.True(errors.As(errOf(b.Create(ctx, p)), new(*ports.Incomplete))) // repaired, without dblink still
	is.True(contains(e.extensions(p.As), "vector"))                     // and repaired
}

// TestDelegatedATrojanInThePublicSchemaNeverRunsAsSuperuser: pgextwlist runs an allow-listed
// extension's script as the bootstrap superuser, for a provider that is not one; the trap the
// consumer planted in its public schema must not be what the script's unqualified call finds.
func TestDelegatedATrojanInThePublicSchemaNeverRunsAsSuperuser(t *testing.T) {
	is := is.New(t)
	e := allowListingEnv(t)
	b, prov := e.delegated()
	p := trojan(t, e, b, "novox_trojan_test", false)
	is.Equal(e.extOwner(p.As, "novox_trojan_test"), "postgres") // made by the bootstrap superuser for the provider
	e.ranAsSuperuserInTheProvidersSchema(p.As, prov)
}

// ranAsSuperuserInTheProvidersSchema asserts that the trojan extension's script ran as a
// superuser in db, so that the trap could have bitten, and in the provider's schema, where
// the consumer may not create.
func (e *env) ranAsSuperuserInTheProvidersSchema(db, prov string) {
	e.t.Helper()
	is := is.New(e.t)
	var probeOwner string
	is.NoErr(e.admin(db).QueryRow(ctx, "SELECT pg_catalog.pg_get_userbyid(proowner)::text FROM pg_proc WHERE proname = 'novox_trojan_probe'").Scan(&probeOwner))
	is.Equal(probeOwner, "postgres") // the script ran as the bootstrap superuser
	var schemaOwner string
	is.NoErr(e.admin(db).QueryRow(ctx, "SELECT pg_catalog.pg_get_userbyid(nspowner)::text FROM pg_namespace WHERE nspname = 'extensions'").Scan(&schemaOwner))
	is.Equal(schemaOwner, prov) // in the provider's schema
	var create bool
	is.NoErr(e.admin(db).QueryRow(ctx, "SELECT has_schema_privilege($1, 'extensions', 'CREATE')", db).Scan(&create))
	is.True(!create) // where the consumer may not create
}
