package domain_test

import (
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/domain"
)

// The audit trail: one info line per create, password rotation, change, repair, withdrawal,
// reinstatement and drop, said once per event, beside the spec's lines (which stay as they are).
func TestEachEventIsSaidOnceInTheAuditTrail(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.configure(domain.Config{OnWithdraw: domain.Drop, DropAfter: time.Hour})
	w.write("/s/letta", "pw")
	w.contributions(consumer("letta", "/s/letta"))
	w.pass(0)
	is.Equal(w.log.audit(), []string{"letta: created"})
	w.pass(domain.DefaultVerifyEvery) // a verify pass that finds it held
	is.Equal(w.log.audit(), []string{"letta: created"})

	w.write("/s/letta", "pw2")
	w.pass(domain.DefaultEvery)
	is.Equal(w.log.audit()[1:], []string{"letta: password rotated"})

	e := consumer("letta", "/s/letta")
	e["values"] = map[string]any{"name": "letta", "extensions": []any{"vector", "pg_trgm"}}
	w.contributions(e)
	w.pass(domain.DefaultEvery)
	is.Equal(w.log.audit()[2:], []string{"letta: updated to what its entry now asks for (values.extensions: +pg_trgm)"}) // what changed

	w.backend.lose("letta")
	w.pass(domain.DefaultVerifyEvery)
	is.Equal(w.log.audit()[3:], []string{"letta: repaired (missing)"}) // with what drifted

	w.contributions()
	w.pass(domain.DefaultEvery)
	w.pass(domain.DefaultWithdrawSettle)
	is.Equal(w.log.audit()[4:], []string{"letta: withdrawn: its login taken away, its data kept"})
	w.contributions(e)
	w.pass(domain.DefaultEvery)
	is.Equal(w.log.audit()[5:], []string{"letta: reinstated (its login given back)"})

	w.contributions()
	w.pass(domain.DefaultEvery)
	w.pass(domain.DefaultWithdrawSettle)
	w.pass(time.Hour + time.Minute)
	w.pass(domain.DefaultEvery)
	is.Equal(w.log.audit()[6:], []string{"letta: withdrawn: its login taken away, its data kept", "letta: dropped: its login and data are gone"})
	for _, e := range w.log.entries {
		if e.Event != "" {
			is.Equal(e.Level.String(), "INFO")                     // an audit line is information
			is.True(strings.HasPrefix(e.Message, e.Consumer+": ")) // and names its consumer first
		}
	}
}

// --log-level debug: one line per pass, with its counts and time, and one per backend call.
func TestDebugSaysEachPassAndEachBackendCall(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/letta", "pw")
	w.write("/s/bob", "pw")
	w.contributions(consumer("letta", "/s/letta"), consumer("bob", "/s/bob"))
	w.pass(0)
	var debug []string
	for _, e := range w.log.debugs {
		debug = append(debug, e.Message)
	}
	is.Equal(debug, []string{
		"record: 0 consumers read in 0s",
		"letta: create done in 0s",
		"bob: create done in 0s",
		"pass: 2 listed, 2 created, 0 reapplied, 0 withdrawn, 0 dropped, 0 failed, 0 unchecked, 0 withdrawals held; took 0s",
	})
}

// A consumer the file no longer lists stays in the Report, with when its withdrawal and its
// drop are due, until nothing of it is left.
func TestTheReportKeepsAWithdrawnConsumerWithItsDropDate(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.configure(domain.Config{OnWithdraw: domain.Drop, DropAfter: 24 * time.Hour})
	w.write("/s/letta", "pw")
	w.write("/s/bob", "pw")
	w.contributions(consumer("letta", "/s/letta"), consumer("bob", "/s/bob"))
	r := w.pass(0)
	is.Equal(len(r.Leaving), 0) // nobody leaving

	w.contributions(consumer("bob", "/s/bob"))
	r = w.pass(domain.DefaultEvery)
	is.Equal(len(r.Leaving), 1)
	l := r.Leaving[0]
	is.Equal(l.As, "letta")
	is.Equal(l.State, domain.LeavingWaiting)                              // waiting for the file to settle
	is.Equal(l.WithdrawAt, w.clk.Now().Add(domain.DefaultWithdrawSettle)) // the file changed just now
	is.Equal(l.DropAt, l.WithdrawAt.Add(24*time.Hour))                    // and dropped a day later
	is.Equal(len(r.Status), 1)                                            // listed: bob alone

	r = w.pass(domain.DefaultWithdrawSettle)
	withdrawnAt := w.clk.Now()
	is.Equal(r.Withdrawn, 1)
	is.Equal(len(r.Leaving), 1)
	l = r.Leaving[0]
	is.Equal(l.State, domain.LeavingWithdrawn)
	is.Equal(l.Since, withdrawnAt)
	is.Equal(l.DropAt, withdrawnAt.Add(24*time.Hour)) // when its data will be dropped
	is.True(l.WithdrawAt.IsZero())

	r = w.pass(24*time.Hour + time.Second)
	is.Equal(r.Dropped, 1)
	is.Equal(len(r.Leaving), 0) // nothing of it is left
}

// A held mass withdrawal shows in the Report: each consumer it holds, as held.
func TestTheReportShowsAHeldMassWithdrawal(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.list("a", "b", "c", "d", "e")
	w.pass(0)
	w.contributions(consumer("a", "/s/a"))
	r := w.pass(domain.DefaultWithdrawSettle * 2)
	is.True(r.MassWithdrawal)
	is.Equal(len(r.Leaving), 4)
	for _, l := range r.Leaving {
		is.Equal(l.State, domain.LeavingHeld)
		is.True(l.DropAt.IsZero()) // the retain policy never drops
	}
}

// A role the backend takes over says so: adopted, not created.
func TestAnAdoptionIsSaidAsOne(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.backend.outside = map[string]bool{"letta": false} // a plain role, made elsewhere
	w.write("/s/letta", "pw")
	w.write("/s/bob", "pw")
	w.contributions(consumer("letta", "/s/letta"), consumer("bob", "/s/bob"))
	w.pass(0)
	is.Equal(w.log.audit(), []string{"letta: adopted", "bob: created"})
}

// Issue 39, case 3: an update's line says what its entry changed, field by field, at once,
// rather than leaving it to provisioner status ten seconds later.
func TestAnUpdateSaysWhatItsEntryChanged(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/letta", "pw")
	e := consumer("letta", "/s/letta")
	e["values"] = map[string]any{"name": "letta", "extensions": []any{"vector", "dblink"}}
	e["derived"] = map[string]any{"settings": map[string]any{"work_mem": "4MB", "lock_timeout": "1s"}}
	w.contributions(e)
	w.pass(0)
	w.pass(domain.DefaultVerifyEvery) // checked: the entry kept is the one the file now holds
	e["values"] = map[string]any{"name": "letta", "extensions": []any{"pg_trgm", "vector"}, "connection_limit": 5}
	e["derived"] = map[string]any{"settings": map[string]any{"work_mem": "8MB", "statement_timeout": "30s"}}
	w.contributions(e)
	w.pass(domain.DefaultEvery)
	is.Equal(w.log.audit()[1:], []string{"letta: updated to what its entry now asks for (" +
		"values.connection_limit: (none) -> 5; values.extensions: +pg_trgm, -dblink; " +
		"derived.settings.lock_timeout: 1s -> (none); derived.settings.statement_timeout: (none) -> 30s; " +
		"derived.settings.work_mem: 4MB -> 8MB)"})
}
