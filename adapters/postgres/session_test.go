package postgres_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/tests/poll"
)

// TestAConsumersSettingsDoNotSteerTheProvider: the consumer owns its database and sets, for
// every session there, a role of its own and the settings that would make the provider's
// statements fail or resolve elsewhere. The provider's sessions there start from their own
// state: the extensions' schema and the extension are the provider's, and the consumer is held.
func TestAConsumersSettingsDoNotSteerTheProvider(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	if !e.available("pg_trgm") {
		t.Skip("pg_trgm is not available on this server")
	}
	p := provision(name("steer"))
	e.mustCreate(p)
	own := e.mustLogin(p.As, p.Password, p.As)
	for _, set := range []string{
		"role = " + p.As, "search_path = public", "statement_timeout = '1ms'", "lock_timeout = '1ms'",
		"default_transaction_read_only = on", "idle_in_transaction_session_timeout = '1ms'", "idle_session_timeout = '1ms'",
		"standard_conforming_strings = off", "default_transaction_isolation = serializable", "check_function_bodies = off",
		"local_preload_libraries = 'novox_no_such_library'",
	} {
		_, err := own.Exec(ctx, "ALTER DATABASE "+p.As+" SET "+set)
		is.NoErr(err) // the consumer may set it for its database
	}
	is.NoErr(own.Close(ctx))

	withTrgm := p
	withTrgm.Values = map[string]any{"name": p.As, "extensions": []any{"pg_trgm"}}
	is.NoErr(errOf(e.b.Create(ctx, withTrgm))) // made, whatever the database says its sessions do
	is.True(e.holds(withTrgm))                 // and checked

	var self, schemaOwner, extOwner, extSchema string
	admin := e.admin("")
	is.NoErr(admin.QueryRow(ctx, "SELECT current_user::text").Scan(&self))
	// The consumer's database refuses the superuser's plain sessions too (its library): read
	// its catalog through a session that names the library itself.
	cfg := admin.Config().Copy()
	cfg.Database = p.As
	cfg.RuntimeParams["local_preload_libraries"] = ""
	cfg.RuntimeParams["role"] = "none"
	cfg.RuntimeParams["idle_session_timeout"] = "0"
	cfg.RuntimeParams["statement_timeout"] = "0"
	db := mustConnect(t, cfg)
	is.NoErr(db.QueryRow(ctx, `SELECT pg_get_userbyid(n.nspowner)::text, pg_get_userbyid(x.extowner)::text, xn.nspname::text
		FROM pg_namespace n, pg_extension x JOIN pg_namespace xn ON xn.oid = x.extnamespace
		WHERE n.nspname = 'extensions' AND x.extname = 'pg_trgm'`).Scan(&schemaOwner, &extOwner, &extSchema))
	is.Equal(schemaOwner, self)       // the extensions schema is the provider's
	is.Equal(extOwner, self)          // and so is the extension
	is.Equal(extSchema, "extensions") // in its schema
	var settings string
	is.NoErr(db.QueryRow(ctx, `SELECT array_to_string(setconfig, ',') FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase
		WHERE d.datname = $1 AND s.setrole = 0`, p.As).Scan(&settings))
	is.True(strings.Contains(settings, "role="+p.As)) // the consumer's settings are its own, left as they are
}

// TestAUrlPasswordWithAnAtIsNeverPrinted: a password holding an unescaped @ is split there by
// the URL's parser, and the rest taken for the host; such a URL, and one that does not parse,
// is refused in words that hold no part of the password.
func TestAUrlPasswordWithAnAtIsNeverPrinted(t *testing.T) {
	for _, url := range []string{
		"postgres://postgres:Sup3r@SECRET@127.0.0.1:1/postgres",
		"postgres://postgres@Sup3rSECRET@127.0.0.1:1/postgres",
		"postgres://postgres:Sup3r:SECRET@127.0.0.1:1/postgres",
		"postgres://postgres:Sup3r/SECRET@127.0.0.1:1/postgres",
		"postgres://postgres:Sup3r#SECRET@127.0.0.1:1/postgres",
	} {
		b, err := postgres.New(postgres.Config{URL: url})
		var said string
		if err != nil {
			said = err.Error()
		} else {
			said = b.Server() + " " + b.Ping(ctx).Error()
			b.Close()
		}
		if strings.Contains(said, "SECRET") || strings.Contains(said, "Sup3r") {
			t.Errorf("%s: printed a part of the password: %s", url, said)
		}
	}
}

// mustConnect is a connection as cfg says, closed with the test.
func mustConnect(t *testing.T, cfg *pgx.ConnConfig) *pgx.Conn {
	t.Helper()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	is.New(t).NoErr(err) // connect
	t.Cleanup(func() { conn.Close(ctx) })
	return conn
}

// TestTheProvidersDatabaseIsNeverATemplate: a session of the provider in a template makes every
// CREATE DATABASE from it fail; template1 is refused by its name, and a database an operator
// made a template by what the server says of it.
func TestTheProvidersDatabaseIsNeverATemplate(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	_, err := postgres.New(postgres.Config{URL: e.srv.URL, Database: "template1"})
	is.True(err != nil && strings.Contains(err.Error(), "database template1 is a template")) // refused as it starts

	db := name("tmpl")
	e.exec("", "CREATE DATABASE "+db+" IS_TEMPLATE true")
	t.Cleanup(func() { e.exec("", "ALTER DATABASE "+db+" IS_TEMPLATE false", "DROP DATABASE "+db) })
	lease := e.backendWith(postgres.Config{URL: e.srv.URL, Database: db, Resource: name("lease")}).Lease()
	defer lease.Close()
	err = lease.Held(ctx)
	is.True(err != nil && strings.Contains(err.Error(), "the provider's database "+db+" is a template")) // no replica acts there
	admin := e.admin("")
	is.True(poll.Within(10*time.Second, func() bool { // a closed session is gone a moment later
		var sessions int
		is.NoErr(admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = $1", db).Scan(&sessions))
		return sessions == 0
	})) // and none stays there
}
