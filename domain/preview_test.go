package domain_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/domain"
)

// previewOf is what a fresh Harness, made for the preview alone, says a pass would do in w.
func previewOf(t *testing.T, w *world, cfg domain.Config) domain.Preview {
	t.Helper()
	cfg.Resource, cfg.Receives, cfg.Once = "postgres", receives, true
	before := len(w.backend.creates) + len(w.backend.removes) + len(w.backend.drops)
	p, err := domain.New(cfg, w.fs, w.clk, w.backend, nil, w.log).Preview(ctx)
	if err != nil {
		t.Fatalf("preview: %v", err)
	}
	if after := len(w.backend.creates) + len(w.backend.removes) + len(w.backend.drops); after != before {
		t.Fatalf("the preview asked the backend to change something: %d calls before, %d after", before, after)
	}
	return p
}

// planned is the preview's line for as.
func planned(t *testing.T, p domain.Preview, as string) domain.Planned {
	t.Helper()
	for _, c := range p.Consumers {
		if c.As == as {
			return c
		}
	}
	t.Fatalf("%s is not in the preview %+v", as, p.Consumers)
	return domain.Planned{}
}

func logins(p domain.Preview) []string {
	var out []string
	for _, c := range p.Consumers {
		out = append(out, c.As)
	}
	return out
}

func TestPreviewNamesWhatAPassDoesForEachListedConsumer(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	for _, as := range []string{"held", "rotated"} {
		w.write("/s/"+as, "pw")
	}
	w.contributions(consumer("held", "/s/held"), consumer("rotated", "/s/rotated"))
	w.pass(0)
	w.write("/s/rotated", "pw2") // the mesh minted a new password
	for _, as := range []string{"fresh", "plain", "super"} {
		w.write("/s/"+as, "pw")
	}
	w.backend.world().Plain(t, "plain")
	w.backend.world().Powerful(t, "super")
	w.contributions(consumer("super", "/s/super"), consumer("held", "/s/held"), consumer("rotated", "/s/rotated"),
		consumer("fresh", "/s/fresh"), consumer("plain", "/s/plain"), consumer("unwritten", "/s/unwritten"))

	p := previewOf(t, w, domain.Config{})
	is.Equal(logins(p), []string{"super", "held", "rotated", "fresh", "plain", "unwritten"}) // the file's order
	is.Equal(planned(t, p, "held").Act, "")                                                  // held as asked: nothing
	is.Equal(planned(t, p, "held").Why, nil)
	is.Equal(planned(t, p, "fresh").Act, "create")
	is.Equal(planned(t, p, "plain").Act, "adopt")
	is.True(slices.Contains(planned(t, p, "plain").Why, "comment (the record)")) // what adoption changes
	is.Equal(planned(t, p, "rotated").Act, "repair")
	is.Equal(planned(t, p, "rotated").Why, []string{"password"}) // the drift words
	is.Equal(planned(t, p, "super").Act, "refuse")
	is.True(strings.Contains(planned(t, p, "super").Why[0], "it is not taken over")) // Create's own reason
	is.Equal(planned(t, p, "unwritten").Act, "wait")
	is.True(strings.HasPrefix(planned(t, p, "unwritten").Why[0], "secret unreadable (/s/unwritten)"))
	is.True(p.Pending())

	// What the preview said is what the next pass does.
	w.pass(time.Second)
	is.Equal(w.backend.createsOf("fresh"), 1)
	is.Equal(w.backend.createsOf("plain"), 1)
	is.Equal(w.backend.createsOf("rotated"), 2)
	is.Equal(w.backend.createsOf("held"), 1) // not asked again
}

func TestPreviewOfAConvergedServerHasNothingPending(t *testing.T) {
	is := is.New(t)
	w := newApplied(t)
	p := previewOf(t, w, domain.Config{})
	is.Equal(len(p.Consumers), 1)
	is.Equal(p.Consumers[0], domain.Planned{As: "letta"}) // nothing to do, nothing to say
	is.True(!p.Pending())
}

func TestPreviewSaysWhenAWithdrawalIsDue(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/letta", "pw")
	w.write("/s/gone", "pw")
	w.contributions(consumer("letta", "/s/letta"), consumer("gone", "/s/gone"))
	w.pass(0)
	w.contributions(consumer("letta", "/s/letta")) // gone is no longer listed

	// The file changed just now: gone waits for it to settle.
	w.clk.Set(time.Now())
	settle := 30 * time.Second
	p := previewOf(t, w, domain.Config{WithdrawSettle: settle})
	is.Equal(logins(p), []string{"letta", "gone"}) // listed first, then the record's others
	gone := planned(t, p, "gone")
	is.Equal(gone.Act, "withdraw")
	is.True(!gone.Held)
	is.True(!gone.At.Before(w.clk.Now().Add(settle - 2*time.Second))) // after the settle
	is.True(!gone.At.After(w.clk.Now().Add(settle)))

	// An hour on, the file has settled: withdrawn on the next pass.
	w.clk.Add(time.Hour)
	p = previewOf(t, w, domain.Config{WithdrawSettle: settle})
	is.Equal(planned(t, p, "gone"), domain.Planned{As: "gone", Act: "withdraw"})
	is.True(p.Pending())
}

func TestPreviewSaysAMassWithdrawalIsHeld(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	var all []entry
	for _, as := range []string{"a1", "a2", "a3", "a4", "a5", "kept"} {
		w.write("/s/"+as, "pw")
		all = append(all, consumer(as, "/s/"+as))
	}
	w.contributions(all...)
	w.pass(0)
	w.contributions(consumer("kept", "/s/kept"))
	w.clk.Set(time.Now())

	p := previewOf(t, w, domain.Config{WithdrawSettle: 10 * time.Second})
	is.True(p.MassWithdrawal)
	for _, as := range []string{"a1", "a2", "a3", "a4", "a5"} {
		c := planned(t, p, as)
		is.Equal(c.Act, "withdraw")
		is.True(c.Held)                                        // held as a mass withdrawal
		is.True(c.At.After(w.clk.Now().Add(50 * time.Second))) // six times the settle
		is.True(!c.At.After(w.clk.Now().Add(60 * time.Second)))
	}
}

func TestPreviewSaysNothingIsWithdrawnWhileAnEntryCannotBeRead(t *testing.T) {
	is := is.New(t)
	w := newApplied(t)
	w.write(receives, `{"requirement":"postgres","given":[{"as":7,"secret":"/s/x"}]}`)
	w.clk.Set(time.Now().Add(time.Hour))
	p := previewOf(t, w, domain.Config{})
	is.Equal(p.BadEntries, 1)
	letta := planned(t, p, "letta")
	is.Equal(letta.Act, "withdraw")
	is.True(strings.Contains(letta.Why[0], "cannot be read")) // why it waits
}

func TestPreviewSaysWhenAWithdrawnConsumerIsDropped(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/old", "pw")
	w.write("/s/recent", "pw")
	w.write("/s/kept", "pw")
	w.contributions(consumer("old", "/s/old"), consumer("recent", "/s/recent"), consumer("kept", "/s/kept"))
	w.pass(0)
	w.clk.Set(time.Now())
	is.NoErr(w.backend.Remove(ctx, "old"))
	w.clk.Add(90 * time.Minute)
	is.NoErr(w.backend.Remove(ctx, "recent"))
	w.clk.Add(10 * time.Minute)
	w.contributions(consumer("kept", "/s/kept"))

	cfg := domain.Config{OnWithdraw: domain.Drop, DropAfter: time.Hour}
	p := previewOf(t, w, cfg)
	is.Equal(logins(p), []string{"kept", "old", "recent"})
	is.Equal(planned(t, p, "old"), domain.Planned{As: "old", Act: "drop", Earliest: true,
		Why: []string{"withdrawn 1h40m0s ago by its record; a daemon drops it once it has seen it withdrawn for 1h0m0s"}}) // withdrawn 100 min ago: due
	recent := planned(t, p, "recent")
	is.Equal(recent.Act, "drop")
	is.Equal(recent.At, w.clk.Now().Add(50*time.Minute)) // the record's since and --drop-after

	// Under the retain policy a withdrawn consumer keeps its data: nothing to do.
	p = previewOf(t, w, domain.Config{})
	is.Equal(planned(t, p, "recent").Act, "")
	is.True(!p.Pending())
}

func TestPreviewFailsWhereThePassCouldNotAct(t *testing.T) {
	is := is.New(t)
	w := newApplied(t)
	cfg := domain.Config{Resource: "postgres", Receives: receives}

	w.backend.managedErr = errors.New("connect: connection refused")
	_, err := domain.New(cfg, w.fs, w.clk, w.backend, nil, w.log).Preview(ctx)
	is.True(err != nil && strings.Contains(err.Error(), "connection refused")) // the server's problem
	w.backend.managedErr = nil

	w.backend.holdsErr = errors.New("timeout")
	_, err = domain.New(cfg, w.fs, w.clk, w.backend, nil, w.log).Preview(ctx)
	is.True(err != nil && strings.Contains(err.Error(), "letta")) // a consumer that could not be asked about
	w.backend.holdsErr = nil

	w.write(receives, `{"requirement":"postgres","given":[`) // torn
	_, err = domain.New(cfg, w.fs, w.clk, w.backend, nil, w.log).Preview(ctx)
	is.True(err != nil && strings.Contains(err.Error(), "not JSON"))
}

// The plan reads the brake's baseline from the record as a starting daemon does: a second step
// of a file cut down in steps is shown held.
func TestPreviewHoldsAStepOfAMassWithdrawalByTheRecord(t *testing.T) {
	is := is.New(t)
	w, all := applied(t, 12)
	w.contributions(all[:7]...) // 5 of 12
	w.pass(0)
	is.Equal(w.pass(settle).Withdrawn, 5)
	w.contributions(all[:4]...) // 3 of 7: 8 of the 12 of this hour
	p := previewOf(t, w, domain.Config{})
	is.True(p.MassWithdrawal)
	is.True(planned(t, p, "c6").Held)
}
