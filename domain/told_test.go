package domain_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

// A fact a backend tells of a consumer (ports.Entry.Once) is said once while it holds, again
// when it changes or after it was over, and forgotten with the consumer once the loop has
// withdrawn it, but for what outlives the withdrawal; another consumer's, even one whose login
// starts with the same letters, stays said. Issue 37: the adapter kept this memory itself.
func TestAConsumersFactsAreSaidOnceAndForgottenWithIt(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	told := domain.NewTold(w.log)
	w.h = domain.New(domain.Config{Resource: "postgres", Receives: receives}, w.fs, w.clk, w.backend, w.lease, told)
	w.list("c0", "c00")
	w.pass(0)
	w.log.take()
	tell := func(as, about, fact string, outlives bool) {
		once := &ports.Once{About: about, Subject: "vector", Fact: fact, Outlives: outlives}
		msg := as + ": " + about + " (" + fact + ")"
		if fact == "" {
			msg = ""
		}
		told.Log(ports.Entry{Level: slog.LevelWarn, Consumer: as, Message: msg, Once: once})
	}
	tellAll := func() {
		for _, as := range []string{"c0", "c00"} {
			tell(as, "extension skipped", "unavailable", false)
			tell(as, "signal lacked", "lacks", true)
		}
	}
	tellAll()
	is.Equal(len(w.log.take()), 4) // each said
	tellAll()
	is.Equal(len(w.log.take()), 0) // and not again while it holds
	tell("c0", "extension skipped", "refused", false)
	is.Equal(w.log.take(), []string{"c0: extension skipped (refused)"}) // changed: said
	tell("c0", "extension skipped", "", false)
	tell("c0", "extension skipped", "refused", false)
	is.Equal(w.log.take(), []string{"c0: extension skipped (refused)"}) // over, and back: said again

	w.list("c00") // c0 withdrawn
	w.pass(time.Minute)
	w.pass(settle)
	is.Equal(w.backend.removes, []string{"c0"})
	w.log.take()
	tell("c0", "extension skipped", "refused", false)
	tell("c0", "signal lacked", "lacks", true)
	tell("c00", "extension skipped", "unavailable", false)
	tell("c00", "signal lacked", "lacks", true)
	is.Equal(w.log.take(), []string{"c0: extension skipped (refused)"}) // forgotten with c0; what outlives it, and c00's, still said
}

// Lines that are no fact of a consumer go straight through, each time.
func TestLinesThatAreNoFactAreSaidEachTime(t *testing.T) {
	is := is.New(t)
	log := &fakeLogger{}
	told := domain.NewTold(log)
	for range 2 {
		told.Log(ports.Entry{Level: slog.LevelWarn, Consumer: "c0", Message: "c0: create failed: boom"})
	}
	is.Equal(log.take(), []string{"c0: create failed: boom", "c0: create failed: boom"})
	domain.NewTold(nil).Log(ports.Entry{Message: "nowhere"}) // says nothing, and does not panic
}
