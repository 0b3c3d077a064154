package postgres

import (
	"log/slog"
	"testing"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/ports"
)

// What the Backend remembers of a consumer's extensions (extensions and updates the server refused it) goes
// with the consumer once it is withdrawn or dropped, and nobody else's with it: issue 37 found
// refusedExt and refusedUpdate never forgotten. What was said of it once is the loop's to
// forget (domain's TestAConsumersFactsAreSaidOnceAndForgottenWithIt).
func TestWhatIsRememberedOfAConsumerIsForgottenWithIt(t *testing.T) {
	is := is.New(t)
	xp := &extensionPath{}
	for _, role := range []string{"letta", "lettabis"} {
		xp.refusedExt.Store(role+"/dblink", "permission denied")
		xp.refusedUpdate.Store(role+"/extension vector -> 0.8.6", "the server refuses it")
	}
	xp.forget("letta")
	remembered := func(role string) (n int) {
		for _, m := range []interface{ Load(any) (any, bool) }{&xp.refusedExt, &xp.refusedUpdate} {
			for _, k := range []string{role + "/dblink", role + "/extension vector -> 0.8.6"} {
				if _, ok := m.Load(k); ok {
					n++
				}
			}
		}
		return n
	}
	is.Equal(remembered("letta"), 0)    // gone with it
	is.Equal(remembered("lettabis"), 2) // a login it is the start of keeps all
}

// A fact told of a consumer carries its key and how it stands for the loop to say it once, and
// whether it outlives the consumer's withdrawal: what a withdrawal tells does, what a create or
// a check tells does not. Its end is told without a line.
func TestAFactIsToldWithItsKeyAndWhetherItOutlivesTheConsumer(t *testing.T) {
	is := is.New(t)
	var got []ports.Entry
	v := voice{log: logFunc(func(e ports.Entry) { got = append(got, e) })}
	v.once(sayKey{"letta", extensionSkipped, "vector"}, "unavailable", slog.LevelWarn,
		"%s: extension %s is not available", "letta", "vector")
	v.once(sayKey{"letta", signalLacked, ""}, "lacks", slog.LevelWarn,
		"%s: its sessions are not ended", "letta")
	v.over(sayKey{"letta", extensionSkipped, "vector"})
	is.Equal(len(got), 3)
	is.Equal(got[0].Message, "letta: extension vector is not available")
	is.Equal(*got[0].Once, ports.Once{About: "extension skipped", Subject: "vector", Fact: "unavailable"})
	is.Equal(*got[1].Once, ports.Once{About: "signal lacked", Fact: "lacks", Outlives: true})
	is.Equal(got[2].Message, "") // over: nothing to say
	is.Equal(*got[2].Once, ports.Once{About: "extension skipped", Subject: "vector"})
	for _, k := range []topic{recordForeign, recordUpgrade, signalLacked} {
		is.True(k.kept()) // what a withdrawal tells
	}
	for _, k := range []topic{extensionSkipped, extensionInPublic, extensionRefused, extensionPin, extensionUpdate, membershipKept, lockHolderEnded} {
		is.True(!k.kept()) // what a create or a check tells
	}
}

type logFunc func(ports.Entry)

func (f logFunc) Log(e ports.Entry) { f(e) }

// The facts an act found (the extensions' create answers them as values) are told as the act
// would have told them itself, in the order found: a fact that holds with its line, one over
// without. A server's message in a line is said as it is, never read as a format.
func TestFactsFoundAreToldInTheirOrder(t *testing.T) {
	is := is.New(t)
	var got []ports.Entry
	v := voice{log: logFunc(func(e ports.Entry) { got = append(got, e) })}
	var told facts
	told.over(sayKey{"letta", extensionSkipped, "vector"})
	told.holds(sayKey{"letta", extensionRefused, "plpython3u"}, "permission denied: 100%",
		"%s: extension %s is refused by the server (%s); skipped", "letta", "plpython3u", "permission denied: 100%")
	told.did("letta", "%s: the database %s was open to others (%v); no longer", "letta", "letta", []string{"PUBLIC"})
	v.tell(&told)
	is.Equal(len(told), 0) // told once
	is.Equal(len(got), 3)
	is.Equal(got[0].Message, "") // over
	is.Equal(*got[0].Once, ports.Once{About: "extension skipped", Subject: "vector"})
	is.Equal(got[1].Level, slog.LevelWarn)
	is.Equal(got[1].Message, "letta: extension plpython3u is refused by the server (permission denied: 100%); skipped")
	is.Equal(*got[1].Once, ports.Once{About: "extension refused", Subject: "plpython3u", Fact: "permission denied: 100%"})
	is.Equal(got[2].Level, slog.LevelWarn) // what a step did: said each time, kept by no Once
	is.Equal(got[2].Consumer, "letta")
	is.Equal(got[2].Message, "letta: the database letta was open to others ([PUBLIC]); no longer")
	is.True(got[2].Once == nil)
}
