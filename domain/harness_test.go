package domain_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

// settle is how long the file must stay unchanged before a withdrawal.
const settle = domain.DefaultWithdrawSettle

func TestUnusableFileIsSaidOnceAndChangesNothing(t *testing.T) {
	cases := []struct {
		name    string
		content string // "" removes the file
		says    string
	}{
		{"unreadable", "", "contributions file unreadable (" + receives + "): open " + receives + ": file does not exist; nothing applied or removed until it can be read"},
		{"not JSON", `{"given": [`, "contributions file is not JSON (" + receives + "): unexpected end of JSON input; nothing applied or removed until it can be read"},
		{"another requirement", `{"requirement": "redis", "given": []}`, receives + " is for redis, not postgres; nothing applied or removed until it can be read"},
		{"no given", `{"requirement": "postgres"}`, receives + " has no given list; nothing applied or removed until it can be read"},
		{"given null", `{"given": null}`, receives + " has no given list; nothing applied or removed until it can be read"},
		{"given not a list", `{"given": {"as": "letta"}}`, receives + " has no given list; nothing applied or removed until it can be read"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			w := newWorld(t)
			w.write("/s/letta", "pw")
			w.contributions(consumer("letta", "/s/letta"))
			w.pass(0)
			is.Equal(w.backend.createsOf("letta"), 1) // applied while the file was good
			w.log.take()

			if c.content == "" {
				w.remove(receives)
			} else {
				w.write(receives, c.content)
			}
			for range 3 {
				r := w.pass(time.Minute)
				is.True(!r.FileRead)                                                                                     // the pass read nothing
				is.True(!r.Converged())                                                                                  // nothing read is not converged
				is.Equal(r.FileProblem, strings.TrimSuffix(c.says, "; nothing applied or removed until it can be read")) // and says why
				is.Equal(r.Consumers, map[string]domain.State{"letta": domain.StateApplied})                             // the last listing read stands
				is.Equal(len(r.Status), 1)
			}
			is.Equal(w.log.take(), []string{c.says})  // said once over three passes
			is.Equal(len(w.backend.removes), 0)       // nothing withdrawn
			is.Equal(len(w.backend.holdsCalls), 0)    // nothing verified
			is.Equal(w.backend.createsOf("letta"), 1) // nothing applied

			w.contributions(consumer("letta", "/s/letta"))
			w.pass(time.Second)
			w.pass(time.Second)
			is.Equal(w.log.take(), []string{"contributions file readable again"}) // said once
		})
	}
}

func TestOversizedFilesAreNotRead(t *testing.T) {
	is := is.New(t)
	defer domain.SetMaxFile(512)()
	w := newWorld(t)
	w.write("/s/letta", strings.Repeat("p", 1025))
	w.contributions(consumer("letta", "/s/letta"))
	r := w.pass(0)
	is.Equal(r.Consumers["letta"], domain.StateFailing) // a secret over 1 KiB is not a password
	is.Equal(w.log.take(), []string{"letta: secret refused (/s/letta): it holds more than 1024 bytes, which is not a password; " +
		"nothing is provisioned for this consumer until it holds a password"})
	is.Equal(len(w.backend.creates), 0)
	w.write(receives, `{"given": []}`+strings.Repeat(" ", 512))
	r = w.pass(0)
	is.True(!r.FileRead) // nor a contributions file over its cap
	is.Equal(w.log.take(), []string{"contributions file unreadable (" + receives + "): " + receives +
		" is larger than 512 bytes; nothing applied or removed until it can be read"})
}

func TestAnotherReasonIsSaidAgain(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write(receives, "garbage")
	w.pass(0)
	w.write(receives, `{"requirement": "redis", "given": []}`)
	w.pass(time.Second)
	w.pass(time.Second)
	is.Equal(len(w.log.take()), 2) // each reason said once
}

func TestEntriesWithoutAsOrSecretAreSkipped(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/x", "pw")
	w.contributions(entry{"secret": "/s/x"}, entry{"as": "nosecret"}, entry{"as": "ok", "secret": "/s/x"})
	r := w.pass(0)
	is.Equal(len(w.backend.creates), 1)                                       // only the full entry
	is.Equal(w.backend.lastCreate().As, "ok")                                 // and it is the one with both
	is.Equal(r.Consumers, map[string]domain.State{"ok": domain.StateApplied}) // the others are not consumers
	is.True(r.Converged())                                                    // the one listed is applied
}

func TestSecretPatienceThenLoudThenRare(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.contributions(consumer("letta", "/s/letta"))
	said := map[int]string{}
	for n := 1; n <= 480; n++ {
		r := w.pass(0)                                               // how often passes run does not matter here
		is.Equal(r.Consumers["letta"], domain.StateWaitingForSecret) // waiting each pass
		for _, line := range w.log.take() {
			said[n] = line
		}
	}
	for n := 1; n <= 12; n++ {
		is.Equal(said[n], "letta: secret not readable yet (/s/letta): open /s/letta: file does not exist") // patient
	}
	loud := "letta: CANNOT READ the secret after %d attempts (/s/letta): open /s/letta: file does not exist. " +
		"This is not a race any more — nothing has been provisioned for this consumer and nothing will be until " +
		"somebody looks. Check who owns the file and who this process runs as (novox/hq issue 225)"
	is.Equal(said[13], fmt.Sprintf(loud, 13))   // loud on the 13th
	is.Equal(said[240], fmt.Sprintf(loud, 240)) // and every 240th
	is.Equal(said[480], fmt.Sprintf(loud, 480))
	is.Equal(len(said), 15)             // silent between
	is.Equal(len(w.backend.creates), 0) // nothing created without a password

	w.write("/s/letta", "pw\n")
	w.pass(5 * time.Second)
	is.Equal(w.backend.createsOf("letta"), 1) // created once readable
	w.remove("/s/letta")
	w.pass(5 * time.Second)
	is.Equal(w.log.take(), []string{"letta: secret not readable yet (/s/letta): open /s/letta: file does not exist"}) // count reset
}

func TestConsumerThatLeavesForgetsItsSecretCount(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.contributions(consumer("letta", "/s/letta"))
	for range 20 {
		w.pass(5 * time.Second)
	}
	w.contributions()
	w.pass(5 * time.Second)
	w.contributions(consumer("letta", "/s/letta"))
	w.log.take()
	w.pass(5 * time.Second)
	is.Equal(w.log.take(), []string{"letta: secret not readable yet (/s/letta): open /s/letta: file does not exist"}) // counted from one again
}

func TestPasswordIsSecretLessOneTrailingNewline(t *testing.T) {
	for secret, want := range map[string]string{"pw": "pw", "pw\n": "pw", "pw\n\n": "pw\n", " pw \n": " pw ", "p\nw": "p\nw"} {
		is := is.New(t)
		w := newWorld(t)
		w.write("/s/letta", secret)
		w.contributions(consumer("letta", "/s/letta"))
		w.pass(0)
		is.Equal(w.backend.lastCreate().Password, want) // one trailing newline is not part of it
	}
}

func TestProvisionCarriesWhatTheFileSays(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/letta", "pw")
	e := consumer("letta", "/s/letta")
	e["derived"] = map[string]any{"database": "letta_db"}
	w.contributions(e)
	w.pass(0)
	is.Equal(w.backend.lastCreate(), ports.Provision{
		As: "letta", Password: "pw", At: "10.0.0.7", Node: "letta",
		Values:  map[string]any{"name": "letta", "extensions": []any{"vector"}},
		Derived: map[string]any{"database": "letta_db"},
	}) // every field delivered
}

// TestProvisionCarriesAwkwardValuesAsTheFileSaysThem: what the loop keeps of an entry between
// passes (its canonical JSON) gives the backend exactly what the file's JSON decodes to, and the
// same entry written with other spacing and key order is the same entry.
func TestProvisionCarriesAwkwardValuesAsTheFileSaysThem(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/letta", "pw")
	raw := `{"requirement": "postgres", "given": [{"as": "letta", "secret": "/s/letta", "values": {"name": "l<&>tta",
"extensions": ["vector", {"name": "pg_trgm", "version": "1.6"}], "x": {"": null, "é\u2028": [1e21, 0.1, -0.0, true]}},
"derived": {"settings": {"work_mem": "64MB"}, "connection_limit": 5}}]}`
	w.write(receives, raw)
	w.pass(0)
	var file struct {
		Given []struct{ Values, Derived map[string]any }
	}
	is.NoErr(json.Unmarshal([]byte(raw), &file))
	p := w.backend.lastCreate()
	is.Equal(p.Values, file.Given[0].Values)   // values as the file's JSON decodes them
	is.Equal(p.Derived, file.Given[0].Derived) // derived too

	w.write(receives, `{"given":[{"derived":{"connection_limit":5.0,"settings":{"work_mem":"64MB"}},"secret":"/s/letta","as":"letta",
"values":{"x":{"é\u2028":[1E+21,0.10,-0,true],"":null},"extensions":["vector",{"version":"1.6","name":"pg_trgm"}],"name":"l\u003c&>tta"}}],
"requirement":"postgres"}`)
	w.pass(5 * time.Second)
	is.Equal(w.backend.createsOf("letta"), 1) // the same entry, written otherwise: not created again
}

func TestMissingValuesAndDerivedAreEmpty(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/letta", "pw")
	w.contributions(entry{"as": "letta", "secret": "/s/letta"})
	w.pass(0)
	p := w.backend.lastCreate()
	is.True(p.Values != nil && len(p.Values) == 0)   // values empty, not nil
	is.True(p.Derived != nil && len(p.Derived) == 0) // derived empty, not nil
}

func TestChangeCreatesAgainAndNoChangeDoesNot(t *testing.T) {
	cases := []struct {
		name   string
		change func(w *world, e entry)
		again  bool
	}{
		{"unchanged", func(w *world, e entry) {}, false},
		{"password", func(w *world, e entry) { w.write("/s/letta", "rotated") }, true},
		{"values", func(w *world, e entry) {
			e["values"] = map[string]any{"name": "letta", "extensions": []any{"vector", "pg_trgm"}}
		}, true},
		{"derived", func(w *world, e entry) { e["derived"] = map[string]any{"database": "other"} }, true},
		{"where it runs", func(w *world, e entry) { e["at"] = "10.0.0.8" }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			w := newWorld(t)
			w.write("/s/letta", "pw")
			e := consumer("letta", "/s/letta")
			w.contributions(e)
			w.pass(0)
			c.change(w, e)
			w.contributions(e)
			w.pass(5 * time.Second) // not a verifying pass
			want := 1
			if c.again {
				want = 2
			}
			is.Equal(w.backend.createsOf("letta"), want) // created again exactly when the hash changed
			is.Equal(len(w.backend.holdsCalls), 0)       // no verification before the interval
		})
	}
}

func TestVerifiesEveryIntervalAndHeldIsLeftAlone(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/letta", "pw")
	w.contributions(consumer("letta", "/s/letta"))
	w.pass(0)                                         // first pass verifies: the interval starts now
	w.pass(59 * time.Second)                          // before the interval
	is.Equal(len(w.backend.holdsCalls), 0)            // not asked yet
	r := w.pass(time.Second)                          // the interval is over
	is.Equal(w.backend.holdsCalls, []string{"letta"}) // asked once
	is.Equal(w.backend.createsOf("letta"), 1)         // held: not applied again
	is.Equal(r.Consumers["letta"], domain.StateApplied)
	is.Equal(len(w.log.lines()), 0) // nothing to say
}

func TestNotHeldIsAppliedAgainAndHeldClearsTheBrake(t *testing.T) {
	is := is.New(t)
	w := newApplied(t)
	w.backend.lose("letta") // behind the loop's back
	r := w.pass(time.Minute)
	is.Equal(w.backend.createsOf("letta"), 2) // applied again
	is.Equal(w.log.take(), []string{"letta: the backend no longer holds it; applying again",
		"letta: what drifted: missing"}) // said so, and what drifted
	is.Equal(r.Consumers["letta"], domain.StateBraked)
	is.Equal(r.Reapplied, 1)

	r = w.pass(time.Minute)
	is.Equal(r.Consumers["letta"], domain.StateApplied) // held again after the re-apply: brake released
	is.Equal(w.backend.createsOf("letta"), 2)           // and not applied again
	w.backend.lose("letta")
	w.pass(time.Minute)
	is.Equal(w.log.take()[0], "letta: the backend no longer holds it; applying again") // counted from one again
}

// A Report's statuses are the loop's as they were when it was handed out: a later pass that
// changes a consumer's changes a copy (the daemon's /status reads the last Report while the
// next pass runs).
func TestAReportsStatusesNeverChangeOnceHandedOut(t *testing.T) {
	is := is.New(t)
	w := newApplied(t)
	first := w.pass(time.Minute) // checked: held
	was := *first.Status[0]
	w.backend.lose("letta")
	second := w.pass(time.Minute) // checked: lost, applied again
	is.Equal(second.Status[0].State, domain.StateBraked)
	is.Equal(second.Status[0].Drift, []string{"missing"})
	is.Equal(*first.Status[0], was) // the first Report's is as it was
	third := w.pass(time.Minute)
	is.Equal(third.Status[0].State, domain.StateApplied)
	is.Equal(second.Status[0].State, domain.StateBraked) // and the second's
}

func TestBrakeDoublesTheWaitUpToAnHour(t *testing.T) {
	is := is.New(t)
	w := newApplied(t)
	w.backend.broken = true
	w.pass(time.Minute)
	is.Equal(w.log.take(), []string{"letta: the backend no longer holds it; applying again",
		"letta: what drifted: what create makes"}) // first re-apply: no wait said

	// The n-th re-apply in a row waits VerifyEvery << (n-1) before the next check.
	waits := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 32 * time.Minute, time.Hour, time.Hour}
	for n := 2; n <= len(waits); n++ {
		prev := waits[n-2]
		calls := len(w.backend.holdsCalls)
		w.pass(prev - time.Minute) // a verifying pass just before the brake lets go
		if prev > time.Minute {
			is.Equal(len(w.backend.holdsCalls), calls) // braked: not asked
		}
		w.log.take()
		w.pass(time.Minute)
		is.Equal(len(w.backend.holdsCalls), calls+1) // asked when the wait is over
		is.Equal(w.log.take(), []string{
			fmt.Sprintf("letta: what create makes changed back after being applied (%d times in a row); applying again", n),
			"letta: what drifted: what create makes",
			fmt.Sprintf("letta: next check in %s", waits[n-1]),
		}) // said, with the doubled wait
	}
}

func TestBrakeWaitNeverOverflows(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.configure(domain.Config{VerifyEvery: time.Nanosecond})
	w.write("/s/letta", "pw")
	w.contributions(consumer("letta", "/s/letta"))
	w.pass(0)
	w.backend.broken = true
	for range 100 {
		w.pass(time.Hour)
	}
	lines := w.log.lines()
	is.Equal(lines[len(lines)-1], "letta: next check in 1h0m0s") // capped, far past where a shift overflows
	is.Equal(w.backend.createsOf("letta"), 101)                  // checked and applied every hour
}

func TestHoldsErrorIsNotLoss(t *testing.T) {
	is := is.New(t)
	w := newApplied(t)
	w.backend.holdsErr = errors.New("connection refused")
	r := w.pass(time.Minute)
	is.Equal(w.backend.createsOf("letta"), 1)                                                                  // not applied again
	is.Equal(w.log.take(), []string{"letta: could not check the backend, will ask again: connection refused"}) // said
	is.Equal(r.Unchecked, 1)
	is.Equal(r.Consumers["letta"], domain.StateApplied) // still taken as applied
	w.pass(time.Minute)
	is.Equal(len(w.backend.holdsCalls), 2) // asked again next interval
}

func TestHoldsTimeoutStopsTheChecksAndTheNextPassContinues(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	for _, as := range []string{"a", "b", "c"} {
		w.write("/s/"+as, "pw")
	}
	w.contributions(consumer("a", "/s/a"), consumer("b", "/s/b"), consumer("c", "/s/c"))
	w.pass(0)
	var deadline error
	w.backend.holdsFn = func(ctx context.Context, p ports.Provision) error {
		w.clk.Add(domain.DefaultHoldsTimeout) // the backend hangs for the whole timeout
		<-ctx.Done()
		deadline = ctx.Err()
		return ctx.Err()
	}
	w.write("/s/c", "rotated") // c changed: created even though verification stopped
	w.pass(time.Minute)
	is.True(errors.Is(deadline, context.DeadlineExceeded))  // the timeout came from the clock
	is.Equal(w.backend.holdsCalls, []string(nil))           // a timed out, b and c not asked
	is.Equal(w.log.count("could not check the backend"), 1) // one line for a
	is.Equal(w.backend.createsOf("c"), 2)                   // the change still applied
	is.Equal(w.backend.createsOf("b"), 1)

	w.backend.holdsFn = nil
	r := w.pass(domain.DefaultEvery)                   // not a verify pass
	is.Equal(w.backend.holdsCalls, []string{"b", "a"}) // continued where it stopped: b, then a again (c was created)
	is.Equal(r.Unchecked, 0)
	w.pass(domain.DefaultEvery)
	is.Equal(len(w.backend.holdsCalls), 2) // and then, until the next interval, nothing
	w.pass(time.Minute)
	is.Equal(w.backend.holdsCalls[2:], []string{"a", "b", "c"}) // the next interval asks all, in the file's order
}

func TestCreateFailureSaidFirstThenEvery240th(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/letta", "pw")
	w.contributions(consumer("letta", "/s/letta"))
	w.backend.createErr = map[string]error{"letta": errors.New("server down")}
	said := 0
	for n := 1; n <= 480; n++ {
		r := w.pass(0)
		is.Equal(r.Consumers["letta"], domain.StateFailing)
		is.Equal(r.Failures, 1)
		for _, line := range w.log.take() {
			is.Equal(line, "letta: create failed, will retry: server down") // the failure, word for word
			is.True(n == 1 || n == 240 || n == 480)                         // first, then every 240th
			said++
		}
	}
	is.Equal(said, 3)

	w.backend.createErr["letta"] = errors.New("disk full")
	w.pass(5 * time.Second)
	is.Equal(w.log.take(), []string{"letta: create failed, will retry: disk full"}) // a different text is said at once
	w.pass(5 * time.Second)
	is.Equal(len(w.log.take()), 0) // and then quiet again

	delete(w.backend.createErr, "letta")
	r := w.pass(5 * time.Second)
	is.Equal(w.log.take(), []string{"letta: created, after 2 failed attempt(s)"}) // counted since the text changed
	is.Equal(r.Consumers["letta"], domain.StateApplied)
	w.pass(5 * time.Second)
	is.Equal(len(w.log.take()), 0) // said once
}

func TestFailingReapplyKeepsTheBrakeCount(t *testing.T) {
	is := is.New(t)
	w := newApplied(t)
	w.backend.broken = true
	w.pass(time.Minute) // first re-apply succeeds: brake 1, next check in a minute
	w.backend.createErr = map[string]error{"letta": errors.New("server down")}
	w.pass(time.Minute) // second re-apply fails
	w.log.take()
	w.pass(5 * time.Second) // not a verifying pass, but a failed consumer is not applied: nothing happens
	is.Equal(len(w.log.take()), 0)
	delete(w.backend.createErr, "letta")
	w.pass(time.Minute) // next check: still not held
	lines := w.log.take()
	is.Equal(lines[0], "letta: what create makes changed back after being applied (2 times in a row); applying again") // the count survived the failure
	is.Equal(lines[len(lines)-1], "letta: next check in 2m0s")
}

func TestWithdrawsWhatIsNoLongerListedInOrder(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	names := []string{"delta", "alpha", "charlie", "bravo"}
	var entries []entry
	for _, as := range names {
		w.write("/s/"+as, "pw")
		e := consumer(as, "/s/"+as)
		e["derived"] = map[string]any{"database": as + "_db"}
		entries = append(entries, e)
	}
	w.contributions(entries...)
	w.pass(0)
	w.contributions(entries[3])
	w.log.take()
	w.pass(5 * time.Second) // the file has not settled yet
	is.Equal(len(w.backend.removes), 0)
	due := w.clk.Now().Add(settle).UTC().Format(time.RFC3339) // the change was seen by this pass
	is.Equal(w.log.take(), []string{
		"alpha: no longer in " + receives + "; withdrawn at " + due + ", once the file has stayed unchanged for 10s, unless it is listed again",
		"charlie: no longer in " + receives + "; withdrawn at " + due + ", once the file has stayed unchanged for 10s, unless it is listed again",
		"delta: no longer in " + receives + "; withdrawn at " + due + ", once the file has stayed unchanged for 10s, unless it is listed again",
	}) // when each falls due, said while it waits
	w.pass(time.Second)
	is.Equal(len(w.log.take()), 0) // once
	r := w.pass(settle)
	is.Equal(w.backend.removes, []string{"alpha", "charlie", "delta"}) // sorted
	is.Equal(r.Withdrawn, 3)
	is.Equal(w.log.take(), []string{
		"alpha: no longer in " + receives + "; withdrawing it from the backend",
		"charlie: no longer in " + receives + "; withdrawing it from the backend",
		"delta: no longer in " + receives + "; withdrawing it from the backend",
	})
	w.pass(5 * time.Second)
	is.Equal(len(w.backend.removes), 3) // once removed, not asked again
}

func TestFailedRemoveIsRetried(t *testing.T) {
	is := is.New(t)
	w := newApplied(t)
	w.contributions()
	w.backend.removeErr = errors.New("server down")
	w.pass(0) // the change seen
	r := w.pass(settle)
	is.Equal(r.Failures, 1)
	is.Equal(w.log.take()[2], "letta: remove failed, will retry: server down") // said, after its wait and its withdrawal
	w.backend.removeErr = nil
	w.pass(5 * time.Second)
	w.pass(5 * time.Second)
	is.Equal(w.backend.removes, []string{"letta", "letta"}) // retried once, then done
}

func TestWithdrawnConsumerComesBackFresh(t *testing.T) {
	is := is.New(t)
	w := newApplied(t)
	w.contributions()
	w.pass(0)
	w.pass(settle)
	w.contributions(consumer("letta", "/s/letta"))
	w.pass(5 * time.Second)
	is.Equal(w.backend.createsOf("letta"), 2) // state was dropped with the removal: created again
}

func TestPasswordIsScrubbedFromEveryLine(t *testing.T) {
	is := is.New(t)
	const pw = "s3cr/et pa?ss&wörd"
	leak := fmt.Sprintf("raw %s query %s path %s", pw, url.QueryEscape(pw), url.PathEscape(pw))
	w := newWorld(t)
	w.write("/s/letta", pw+"\n")
	w.contributions(consumer("letta", "/s/letta"))
	w.backend.createErr = map[string]error{"letta": errors.New("create: " + leak)}
	w.pass(0)
	delete(w.backend.createErr, "letta")
	w.pass(5 * time.Second)
	w.backend.holdsErr = errors.New("holds: " + leak)
	w.pass(time.Minute)
	w.contributions()
	w.backend.removeErr = errors.New("remove: " + leak)
	w.pass(time.Minute)
	w.pass(settle)

	lines := w.log.lines()
	is.Equal(lines[0], "letta: create failed, will retry: create: raw *** query *** path ***") // each form scrubbed
	is.Equal(w.log.count("***"), 3)                                                            // create, holds and remove lines
	for _, line := range lines {
		for _, form := range []string{pw, url.QueryEscape(pw), url.PathEscape(pw)} {
			is.True(!strings.Contains(line, form)) // no form of the password in any line
		}
	}
}

func TestReportNamesTheFilesToWatchAndTheTime(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/a", "pw")
	w.contributions(consumer("a", "/s/a"), consumer("b", "/s/b"))
	w.backend.createFn = func(context.Context, ports.Provision) { w.clk.Add(time.Second) } // a create takes a second
	r := w.pass(0)
	is.Equal(r.Watched, []string{receives, "/s/a", "/s/b"}) // the file and every secret, read or not
	is.Equal(r.Took, time.Second)                           // by the loop's clock
	w.remove(receives)
	r = w.pass(0)
	is.Equal(r.Watched, []string{receives}) // an unreadable file is still worth watching
}

func TestOneConsumersFailureDoesNotStopOthers(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/a", "pw")
	w.write("/s/c", "pw")
	w.contributions(consumer("a", "/s/a"), consumer("b", "/s/missing"), consumer("c", "/s/c"))
	w.backend.createErr = map[string]error{"a": errors.New("bad name")}
	r := w.pass(0)
	is.Equal(w.backend.createsOf("c"), 1) // c created despite a failing and b waiting
	is.Equal(r.Consumers, map[string]domain.State{"a": domain.StateFailing, "b": domain.StateWaitingForSecret, "c": domain.StateApplied})
	is.True(!r.Converged()) // not every consumer is there
}

func TestDuplicateLoginFirstEntryWins(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/one", "one")
	w.write("/s/two", "two")
	w.contributions(consumer("letta", "/s/one"), consumer("letta", "/s/two"))
	for range 3 {
		w.pass(5 * time.Second)
	}
	is.Equal(w.backend.createsOf("letta"), 1)                                                                   // not flipped between the two
	is.Equal(w.backend.lastCreate().Password, "one")                                                            // the first entry
	is.Equal(w.log.take(), []string{"letta: listed more than once in " + receives + "; using the first entry"}) // said once
	w.contributions(consumer("letta", "/s/one"))
	w.pass(5 * time.Second)
	w.pass(settle) // put right, and settled so
	w.contributions(consumer("letta", "/s/one"), consumer("letta", "/s/two"))
	w.pass(5 * time.Second)
	is.Equal(w.log.count("listed more than once"), 1) // said again once it comes back
}

// A file with duplicated logins rewritten in place 26 times passes through states that list
// part of it: each login is said once, not once per rewrite (the loop said 520 lines).
func TestADuplicateIsSaidOncePerLoginWhateverTheRewrites(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	var entries []entry
	for i := range 20 {
		as := fmt.Sprint("d", i)
		w.write("/s/"+as, "pw")
		entries = append(entries, consumer(as, "/s/"+as))
	}
	entries = append(entries, entries...) // every login twice
	w.contributions(entries...)
	w.pass(0)
	for i := range 26 {
		w.contributions(entries[:20+i%7]...) // a state the rewrite passes through: part of it
		w.pass(100 * time.Millisecond)
		w.contributions(entries...)
		w.pass(100 * time.Millisecond)
	}
	is.Equal(w.log.count("listed more than once"), 20) // once per login

	w.contributions(entries[:20]...)
	w.pass(0)
	w.pass(settle) // put right for good
	w.contributions(entries[:21]...)
	w.pass(0)
	is.Equal(w.log.count("listed more than once"), 21) // the one that came back, again
}

func TestLevels(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write(receives, "garbage")
	w.pass(0)
	is.Equal(w.log.entries[0].Level.String(), "WARN") // an unusable file is a warning
	is.Equal(w.log.entries[0].Consumer, "")           // about no consumer
	w.contributions(consumer("letta", "/s/letta"))
	w.pass(0)
	is.Equal(w.log.entries[2].Consumer, "letta") // a consumer's line names it
}

// A re-apply that is refused keeps the count of re-applies in a row, as the spec's loop keeps
// it across failed re-applies: the next check that finds the consumer lost goes on counting
// (it started again from 1, and said no wait).
func TestARefusedReapplyKeepsTheLostCount(t *testing.T) {
	is := is.New(t)
	w := newApplied(t)
	w.backend.broken = true
	w.pass(time.Minute) // re-apply 1 succeeds: the next check in a minute
	w.log.take()
	w.backend.createErr = map[string]error{"letta": fmt.Errorf("create role letta: renamed away: %w", ports.ErrRefused)}
	w.pass(time.Minute) // re-apply 2 is refused
	said := w.log.take()
	is.Equal(said[0], "letta: what create makes changed back after being applied (2 times in a row); applying again")
	w.backend.createErr = nil
	var last []string
	for range 10 { // the refusal's back-off, then a check (a confirm) that finds it still lost
		w.pass(time.Minute)
		if l := w.log.take(); len(l) > 0 {
			last = l
			break
		}
	}
	is.True(len(last) > 0)
	is.Equal(last[0], "letta: what create makes changed back after being applied (2 times in a row); applying again") // counted on, not from 1
	is.Equal(last[len(last)-1], "letta: next check in 2m0s")                                                          // and its wait doubled as the count says
}

// With the drop policy, the line said while a withdrawal waits says when the data goes too.
func TestAWaitingWithdrawalSaysWhenItsDataIsDropped(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.configure(domain.Config{OnWithdraw: domain.Drop, DropAfter: 24 * time.Hour})
	w.write("/s/letta", "pw")
	w.contributions(consumer("letta", "/s/letta"))
	w.pass(0)
	w.contributions()
	w.log.take()
	w.pass(time.Second)
	due := w.clk.Now().Add(settle)
	is.Equal(w.log.take(), []string{"letta: no longer in " + receives + "; withdrawn at " + due.UTC().Format(time.RFC3339) +
		" and dropped with its data at " + due.Add(24*time.Hour).UTC().Format(time.RFC3339) +
		", once the file has stayed unchanged for 10s, unless it is listed again"})
}
