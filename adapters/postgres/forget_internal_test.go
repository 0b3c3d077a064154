package postgres

import (
	"testing"

	"github.com/matryer/is"
)

// What the Backend remembers of a consumer (extensions and updates the server refused it, what
// its creates said of it once) goes with the consumer once it is withdrawn or dropped, and
// nobody else's with it: issue 37 found refusedExt and refusedUpdate never forgotten. What a
// withdrawal says stays said, as every retry of it would say it again.
func TestWhatIsRememberedOfAConsumerIsForgottenWithIt(t *testing.T) {
	is := is.New(t)
	b := &Backend{}
	for _, role := range []string{"letta", "lettabis"} {
		b.refusedExt.Store(role+"/dblink", "permission denied")
		b.refusedUpdate.Store(role+"/extension vector -> 0.8.6", "the server refuses it")
		b.said.first(sayKey{role, extensionUpdate, "vector"}, "refused")
		b.said.first(sayKey{role, membershipKept, "a>b/c"}, "denied")
		b.said.first(sayKey{role, signalLacked, ""}, "lacks")
	}
	b.forget("letta")
	remembered := func(role string) (n int) {
		for _, m := range []interface{ Load(any) (any, bool) }{&b.refusedExt, &b.refusedUpdate} {
			for _, k := range []string{role + "/dblink", role + "/extension vector -> 0.8.6"} {
				if _, ok := m.Load(k); ok {
					n++
				}
			}
		}
		for _, k := range []sayKey{{role, extensionUpdate, "vector"}, {role, membershipKept, "a>b/c"}} {
			if _, ok := b.said.said[k]; ok {
				n++
			}
		}
		return n
	}
	is.Equal(remembered("letta"), 0)                                   // gone with it
	is.Equal(remembered("lettabis"), 4)                                // a login it is the start of keeps all
	is.True(!b.said.first(sayKey{"letta", signalLacked, ""}, "lacks")) // what its withdrawal said is still said
}
