package postgres

import (
	"fmt"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/adapters/postgres/scram"
)

func TestVerifiedCacheAnswersAsPasswordVerifies(t *testing.T) {
	is := is.New(t)
	var c verifiedCache
	v, err := scram.Verifier("pencil", scram.DefaultIterations)
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
