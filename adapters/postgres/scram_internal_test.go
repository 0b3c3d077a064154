package postgres

import (
	"fmt"
	"strings"
	"testing"

	"github.com/matryer/is"
)

func TestVerifierIsPostgresFormatAndVerifies(t *testing.T) {
	is := is.New(t)
	v, err := scramVerifier("pencil", scramIterations)
	is.NoErr(err)
	is.True(strings.HasPrefix(v, "SCRAM-SHA-256$4096:"))   // PostgreSQL's format and default iterations
	is.True(passwordVerifies(v, "pencil", "letta", true))  // the minted password verifies
	is.True(!passwordVerifies(v, "Pencil", "letta", true)) // another does not
	w, err := scramVerifier("pencil", scramIterations)
	is.NoErr(err)
	is.True(v != w) // a fresh salt each time
	is.True(!strings.Contains(v, "pencil"))
}

func TestVerifierUsesTheIterationsItIsGivenAndAnyVerifies(t *testing.T) {
	is := is.New(t)
	v, err := scramVerifier("pencil", 10000)
	is.NoErr(err)
	is.True(strings.HasPrefix(v, "SCRAM-SHA-256$10000:"))    // the server's scram_iterations
	is.True(passwordVerifies(v, "pencil", "letta", false))   // verifies whatever the iterations
	is.True(!passwordVerifies(v, "pencil!", "letta", false)) // and only for its password
}

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

func TestMD5AndGarbageVerifiers(t *testing.T) {
	is := is.New(t)
	is.True(!passwordVerifies("md5e6a92bf398db27aadbe8d4fe8dc183ed", "pencil", "letta", false)) // drift on 18 and later
	// md5 of "pencil" followed by the role name "letta", as PostgreSQL stores it.
	is.True(passwordVerifies("md5e6a92bf398db27aadbe8d4fe8dc183ed", "pencil", "letta", true))  // the minted password
	is.True(!passwordVerifies("md5e6a92bf398db27aadbe8d4fe8dc183ed", "pencil", "other", true)) // salted by the role name
	is.True(!passwordVerifies("md5e6a92bf398db27aadbe8d4fe8dc183ed", "Pencil", "letta", true)) // another password
	for _, stored := range []string{"", "plain", "md5short", "SCRAM-SHA-256$", "SCRAM-SHA-256$x:salt$a:b",
		"SCRAM-SHA-256$4096:!!$a:b", "SCRAM-SHA-256$0:c2FsdA==$a:b", "SCRAM-SHA-256$4096:c2FsdA==$only"} {
		is.True(!passwordVerifies(stored, "pencil", "letta", true)) // never true for what is not a verifier
	}
}

func TestSASLprepCases(t *testing.T) {
	is := is.New(t)
	for in, want := range map[string]string{
		"plain\x01ascii":       "plain\x01ascii", // ASCII is left as it is
		"\ufb01sh":             "fish",           // NFKC
		"no\u00a0break":        "no break",       // a non-ASCII space is a space
		"soft\u00adhyphen":     "softhyphen",     // mapped to nothing
		"\u05d0\u05d1":         "\u05d0\u05d1",   // right to left, well formed
		"\ufb01\u05d0":         "\ufb01\u05d0",   // mixed directions: raw
		"\ufb01\u0221":         "\ufb01\u0221",   // unassigned in Unicode 3.2: raw
		"\u00ad":               "\u00ad",         // empty once mapped: raw
		"\xff\ufb01":           "\xff\ufb01",     // not UTF-8: raw
		"\u05d0a\u05d1":        "\u05d0a\u05d1",  // an L character among R: raw
		"\u05d0\u05d1\u0661!a": "\u05d0\u05d1\u0661!a",
	} {
		is.Equal(saslprep(in), want) // PostgreSQL's rule
	}
}

func TestVerifiedCacheAnswersAsPasswordVerifies(t *testing.T) {
	is := is.New(t)
	var c verifiedCache
	v, err := scramVerifier("pencil", scramIterations)
	is.NoErr(err)
	for range 2 { // computed, then remembered
		is.True(c.verifies(v, "pencil", "letta"))
		is.True(!c.verifies(v, "other", "letta"))
	}
	is.Equal(c.derivations, 4)                   // one answer per role: another password takes its place
	md5 := "md5e6a92bf398db27aadbe8d4fe8dc183ed" // of "pencil" for letta
	is.True(!c.verifies(md5, "pencil", "letta")) // md5 counts only where the server is older than 18
	c.md5Counts.Store(true)
	is.True(c.verifies(md5, "pencil", "letta")) // not an answer remembered from before the server said
	for i := range 20000 {
		c.verifies("md5"+strings.Repeat("0", 32), "pw", fmt.Sprintf("role%d", i))
	}
	is.Equal(len(c.answers), 20001) // one per role, however many
	before := c.derivations
	for i := range 20000 {
		c.verifies("md5"+strings.Repeat("0", 32), "pw", fmt.Sprintf("role%d", i))
	}
	is.Equal(c.derivations, before) // asked again, none derived again
	c.forget("letta")
	is.Equal(len(c.answers), 20000)
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
	exts, pins, err := extensionsOf(map[string]any{"extensions": []any{"vector", "pg_trgm", "vector"}})
	is.NoErr(err)
	is.Equal(exts, []string{"vector", "pg_trgm"})
	is.Equal(len(pins), 0) // none pinned
	_, _, err = extensionsOf(map[string]any{"extensions": []any{1.0}})
	is.Equal(err.Error(), "values.extensions holds float64 1, not a name")
	_, _, err = extensionsOf(map[string]any{"extensions": []any{[]any{"x\x1b[2J\u202e"}}}) // from the file: quoted
	is.Equal(err.Error(), `values.extensions holds []interface {} "[x\x1b[2J\u202e]", not a name`)
}
