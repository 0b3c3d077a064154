package scram

import (
	"strings"
	"testing"

	"github.com/matryer/is"
)

func TestVerifierIsPostgresFormatAndVerifies(t *testing.T) {
	is := is.New(t)
	v, err := Verifier("pencil", DefaultIterations)
	is.NoErr(err)
	is.True(strings.HasPrefix(v, "SCRAM-SHA-256$4096:")) // PostgreSQL's format and default iterations
	is.True(Verifies(v, "pencil", "letta", true))        // the minted password verifies
	is.True(!Verifies(v, "Pencil", "letta", true))       // another does not
	w, err := Verifier("pencil", DefaultIterations)
	is.NoErr(err)
	is.True(v != w) // a fresh salt each time
	is.True(!strings.Contains(v, "pencil"))
}

func TestVerifierUsesTheIterationsItIsGivenAndAnyVerifies(t *testing.T) {
	is := is.New(t)
	v, err := Verifier("pencil", 10000)
	is.NoErr(err)
	is.True(strings.HasPrefix(v, "SCRAM-SHA-256$10000:")) // the server's scram_iterations
	is.True(Verifies(v, "pencil", "letta", false))        // verifies whatever the iterations
	is.True(!Verifies(v, "pencil!", "letta", false))      // and only for its password
}

func TestMD5AndGarbageVerifiers(t *testing.T) {
	is := is.New(t)
	is.True(!Verifies("md5e6a92bf398db27aadbe8d4fe8dc183ed", "pencil", "letta", false)) // drift on 18 and later
	// md5 of "pencil" followed by the role name "letta", as PostgreSQL stores it.
	is.True(Verifies("md5e6a92bf398db27aadbe8d4fe8dc183ed", "pencil", "letta", true))  // the minted password
	is.True(!Verifies("md5e6a92bf398db27aadbe8d4fe8dc183ed", "pencil", "other", true)) // salted by the role name
	is.True(!Verifies("md5e6a92bf398db27aadbe8d4fe8dc183ed", "Pencil", "letta", true)) // another password
	for _, stored := range []string{"", "plain", "md5short", "SCRAM-SHA-256$", "SCRAM-SHA-256$x:salt$a:b",
		"SCRAM-SHA-256$4096:!!$a:b", "SCRAM-SHA-256$0:c2FsdA==$a:b", "SCRAM-SHA-256$4096:c2FsdA==$only"} {
		is.True(!Verifies(stored, "pencil", "letta", true)) // never true for what is not a verifier
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
