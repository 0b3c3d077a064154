package postgres

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/matryer/is"

	"github.com/novox/postgres-provider/ports"
)

func TestServerVersionsAreReadAndOldOnesSaidInOneLine(t *testing.T) {
	is := is.New(t)
	for in, want := range map[string]int{"18.4": 18, "15.8 (Debian 15.8-0+deb12u1)": 15, "19devel": 19, "18beta1": 18, "9.6.24": 9} {
		got, ok := majorOf(in)
		is.True(ok)
		is.Equal(got, want) // the major version
	}
	_, ok := majorOf("")
	is.True(!ok) // not reported: asked instead
	is.Equal(reason(fmt.Errorf("connect: %w", unsupported{version: "13.16"})),
		"is PostgreSQL 13.16, older than 14: the provider supports PostgreSQL 14 to 18; upgrade the server") // the version, in one line
}

func TestAnEndedSessionIsNotCalledAServerStarting(t *testing.T) {
	is := is.New(t)
	starting := &pgconn.PgError{Code: cannotConnectNow, Message: "the database system is starting up"}
	is.Equal(reason(starting), "is starting or stopping (57P03: the database system is starting up)")
	ended := &pgconn.PgError{Code: adminShutdown, Message: "terminating connection due to administrator command"}
	is.Equal(reason(fmt.Errorf("renew: %w", ended)), "ended the provider's session (57P01: terminating connection due to administrator command): "+
		"it is stopping, or somebody terminated the session") // pg_terminate_backend and a fast shutdown say the same
}

func TestDatabaseNamePrecedence(t *testing.T) {
	is := is.New(t)
	db, _ := databaseOf("letta", map[string]any{"name": "from_values"}, map[string]any{"database": "from_derived"})
	is.Equal(db, "from_derived") // derived wins
	db, _ = databaseOf("letta", map[string]any{"name": "from_values"}, map[string]any{})
	is.Equal(db, "from_values") // then values.name
	db, _ = databaseOf("letta", map[string]any{}, nil)
	is.Equal(db, "letta") // then the login
	_, err := databaseOf("letta", nil, map[string]any{"database": []any{}})
	is.Equal(err.Error(), "derived.database is []interface {}, not a string")
}

func TestExtensionsAreDeduplicatedInOrder(t *testing.T) {
	is := is.New(t)
	exts, pins, err := extensionsRead(map[string]any{"extensions": []any{"vector", "pg_trgm", "vector"}})
	is.NoErr(err)
	is.Equal(exts, []string{"vector", "pg_trgm"})
	is.Equal(len(pins), 0) // none pinned
	_, _, err = extensionsRead(map[string]any{"extensions": []any{1.0}})
	is.Equal(err.Error(), "values.extensions holds float64 1, not a name")
	_, _, err = extensionsRead(map[string]any{"extensions": []any{[]any{"x\x1b[2J\u202e"}}}) // from the file: quoted
	is.Equal(err.Error(), `values.extensions holds []interface {} "[x\x1b[2J\u202e]", not a name`)
}

// extensionsRead is extensionsOf of what ports.Provision reads of values.extensions.
func extensionsRead(values map[string]any) ([]string, map[string]string, error) {
	return extensionsOf(ports.Provision{Values: values}.Extensions())
}
