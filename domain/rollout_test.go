package domain_test

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

// vectorUpdate is what a check of a consumer at vector 0.8.0 says where 0.8.6 is wanted.
func vectorUpdate() ports.Update {
	return ports.Update{Key: "extension vector -> 0.8.6", Subject: "extension vector", From: "0.8.0", To: "0.8.6",
		Word: "extension vector 0.8.0, wanted 0.8.6", Step: "update vector 0.8.0 -> 0.8.6",
		Done: "extension vector updated 0.8.0 -> 0.8.6", Offer: "0.8.0, 0.8.6"}
}

// rolloutWorld is n consumers applied, each then found due vectorUpdate, with cfg's staging.
func rolloutWorld(t *testing.T, n int, cfg domain.Config) (*world, []string) {
	t.Helper()
	w := newWorld(t)
	w.configure(cfg)
	var entries []entry
	var logins []string
	for i := range n {
		as := fmt.Sprintf("c%02d", i)
		w.write("/s/"+as, "pw-"+as)
		entries = append(entries, consumer(as, "/s/"+as))
		logins = append(logins, as)
	}
	w.contributions(entries...)
	w.pass(0)
	w.backend.mu.Lock()
	w.backend.due = map[string][]ports.Update{}
	for _, as := range logins {
		w.backend.due[as] = []ports.Update{vectorUpdate()}
	}
	w.backend.mu.Unlock()
	w.log.take()
	return w, logins
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}

func (b *fakeBackend) updates() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.updated)
}

func TestStagedUpdateGoesToTheCanaryFirstAndTheRestAfterTheSoak(t *testing.T) {
	is := is.New(t)
	w, logins := rolloutWorld(t, 5, domain.Config{Canaries: 2, Soak: 10 * time.Minute, Parallel: 3})

	r := w.pass(time.Minute)                                      // a verify pass: every consumer found due it
	is.Equal(sorted(w.backend.updates()), []string{"c00", "c01"}) // the canaries first, in the file's order
	is.Equal(len(r.Rollouts), 1)
	ro := r.Rollouts[0]
	is.Equal(ro.Key, "extension vector -> 0.8.6")
	is.Equal([]any{ro.Subject, ro.From, ro.To, ro.Done, ro.Total}, []any{"extension vector", "0.8.0", "0.8.6", 2, 5}) // two of five
	is.Equal(ro.Canaries, []string{"c00", "c01"})
	is.Equal(ro.FollowAt, w.clk.Now().Add(10*time.Minute)) // the soak counts from when both held it
	is.True(slices.Contains(w.log.audit(), "c00: extension vector updated 0.8.0 -> 0.8.6"))
	is.Equal(r.Status[2].Updates, []string{"extension vector 0.8.0, wanted 0.8.6"}) // the rest wait, and /status says so
	is.Equal(r.Status[0].Updates, []string(nil))                                    // a canary holds it
	is.True(!r.Converged())                                                         // --once exits 1: the rest wait for a later pass

	for range 9 {
		w.pass(time.Minute) // verify passes within the soak
	}
	is.Equal(len(w.backend.updates()), 2) // the rest wait for the soak

	r = w.pass(time.Minute)                       // the soak is over
	is.Equal(sorted(w.backend.updates()), logins) // the rest followed
	is.Equal(len(r.Rollouts), 0)                  // and the rollout is over
	is.Equal(w.log.count("rollout of extension vector -> 0.8.6: the canaries (c00, c01) held it for 10m0s; the rest follow"), 1)
	is.True(r.Converged())
}

// A consumer found holding the new version (created at the server's new default, or pinned to
// it) takes a canary's place: nobody else is updated until it has held it for the soak. It never
// lets the rest skip the soak, nor does a restart during the soak.
func TestAConsumerHoldingTheChangeIsACanaryNotAWayRoundTheSoak(t *testing.T) {
	is := is.New(t)
	w, logins := rolloutWorld(t, 3, domain.Config{Soak: 10 * time.Minute})
	w.backend.mu.Lock()
	w.backend.due["c01"] = nil
	w.backend.has = map[string][]string{"c01": {"extension vector -> 0.8.6"}} // created at 0.8.6 already
	w.backend.mu.Unlock()
	r := w.pass(time.Minute)
	is.Equal(len(w.backend.updates()), 0) // c01 holds it: the canary's place is taken
	is.Equal(r.Rollouts[0].FollowAt, w.clk.Now().Add(10*time.Minute))
	is.Equal(r.Rollouts[0].Canaries, []string{"c01"}) // shown as the one soaking it
	w.pass(5 * time.Minute)
	is.Equal(len(w.backend.updates()), 0) // still soaking

	// A restart during the soak: the new process finds c01 holding it, and soaks again.
	w.configure(domain.Config{Soak: 10 * time.Minute})
	w.pass(time.Minute)
	is.Equal(len(w.backend.updates()), 0)
	w.pass(9 * time.Minute)
	is.Equal(len(w.backend.updates()), 0) // 9 min since this process found it held
	w.pass(time.Minute)
	is.Equal(sorted(w.backend.updates()), []string{logins[0], logins[2]}) // held for the soak: the rest follow
	is.Equal(w.log.count("rollout of extension vector -> 0.8.6: the canaries (c01) held it for 10m0s; the rest follow"), 1)
}

func TestFailedUpdateHaltsTheRolloutForEveryConsumerUntilSIGHUP(t *testing.T) {
	is := is.New(t)
	w, logins := rolloutWorld(t, 20, domain.Config{Soak: time.Minute})
	w.backend.mu.Lock()
	w.backend.failUpdate = map[string]string{"extension vector -> 0.8.6": `division by zero`}
	w.backend.mu.Unlock()

	r := w.pass(time.Minute)
	halted := "rollout of extension vector -> 0.8.6 halted for every consumer: c00: update vector 0.8.0 -> 0.8.6 failed: " +
		"division by zero; each keeps the version it has until SIGHUP or the server's versions of it change"
	is.Equal(w.log.levelOf(halted), slog.LevelError)
	is.Equal(w.log.take(), []string{halted})          // said once at ERROR, naming the consumer, the versions and the reason
	is.Equal(r.Consumers["c00"], domain.StateApplied) // the canary keeps what it had, and the rest of its create stands
	is.Equal(r.Rollouts[0].Halted, halted[len("rollout of extension vector -> 0.8.6 halted for every consumer: "):strings.Index(halted, ";")])
	is.Equal([]int{r.Rollouts[0].Done, r.Rollouts[0].Total}, []int{0, 20})
	w.backend.mu.Lock()
	tried := len(w.backend.creates)
	w.backend.mu.Unlock()
	for range 5 {
		w.pass(time.Minute)
	}
	w.backend.mu.Lock()
	is.Equal(len(w.backend.creates), tried) // halted for all 20: nobody tried again
	w.backend.failUpdate = nil              // the script fixed
	w.backend.mu.Unlock()
	is.Equal(len(w.log.take()), 0) // and not said again

	w.pass(time.Minute)
	is.Equal(len(w.backend.updates()), 0) // a fixed script alone does not resume it
	w.h.RetryNow()                        // SIGHUP
	w.pass(time.Second)
	is.Equal(w.backend.updates(), []string{"c00"}) // resumed at once, with the canary
	w.pass(time.Minute)
	w.pass(time.Minute)
	is.Equal(sorted(w.backend.updates()), logins) // then the rest, after the soak
}

func TestHaltedRolloutResumesWhenTheServersVersionsChange(t *testing.T) {
	is := is.New(t)
	w, _ := rolloutWorld(t, 2, domain.Config{})
	w.backend.mu.Lock()
	w.backend.failUpdate = map[string]string{"extension vector -> 0.8.6": "boom"}
	w.backend.mu.Unlock()
	w.pass(time.Minute)
	is.True(w.h.Reconcile(ctx).Rollouts[0].Halted != "") // halted
	w.backend.mu.Lock()
	w.backend.failUpdate = nil
	for as := range w.backend.due {
		w.backend.due[as][0].Offer = "0.8.0, 0.8.6, 0.8.7" // the package was upgraded
	}
	w.backend.mu.Unlock()
	w.pass(time.Minute)
	is.Equal(w.backend.updates(), []string{"c00"}) // resumed
	is.Equal(w.log.count("rollout of extension vector -> 0.8.6 resumes: the backend's offer for it changed (0.8.0, 0.8.6, 0.8.7)"), 1)
}

func TestUpdatesOffSayTheDriftOnceAndUpdateNothing(t *testing.T) {
	is := is.New(t)
	w, _ := rolloutWorld(t, 2, domain.Config{Updates: domain.Off})
	for range 3 {
		w.pass(time.Minute)
	}
	is.Equal(len(w.backend.updates()), 0) // nothing updated
	is.Equal(w.log.take(), []string{
		"c00: extension vector 0.8.0, wanted 0.8.6; not updated (extension updates are off)",
		"c01: extension vector 0.8.0, wanted 0.8.6; not updated (extension updates are off)",
	}) // said once each
}

func TestRefusedUpdateIsSaidOnceAndNeverTried(t *testing.T) {
	is := is.New(t)
	w, _ := rolloutWorld(t, 1, domain.Config{})
	u := vectorUpdate()
	u.Key, u.Step, u.Refused = "extension vector -> 0.7.0", "update vector 0.8.0 -> 0.7.0", "0.7.0 is older than the installed 0.8.0: an extension is never downgraded"
	w.backend.mu.Lock()
	w.backend.due["c00"] = []ports.Update{u}
	w.backend.mu.Unlock()
	for range 3 {
		w.pass(time.Minute)
	}
	is.Equal(len(w.backend.updates()), 0) // never tried
	is.Equal(w.log.take(), []string{"c00: update vector 0.8.0 -> 0.7.0 refused: 0.7.0 is older than the installed 0.8.0: an extension is never downgraded"})
	r := w.pass(time.Minute)
	is.Equal(r.Status[0].Updates, []string{"extension vector 0.8.0, wanted 0.8.6 (update vector 0.8.0 -> 0.7.0 refused: " +
		"0.7.0 is older than the installed 0.8.0: an extension is never downgraded)"}) // /status says why it stays
}

// A change refused, then found makeable (staged), then refused again, is said again: what was
// said of it ended when it was staged.
func TestARefusalIsSaidAgainOnceItsChangeWasStagedMeanwhile(t *testing.T) {
	is := is.New(t)
	w, _ := rolloutWorld(t, 1, domain.Config{})
	due := func(refused string) {
		u := vectorUpdate()
		u.Refused = refused
		w.backend.mu.Lock()
		w.backend.due["c00"] = []ports.Update{u}
		w.backend.mu.Unlock()
	}
	refusal := "c00: update vector 0.8.0 -> 0.8.6 refused: not on the allow-list"
	due("not on the allow-list")
	w.pass(time.Minute)
	w.pass(time.Minute)
	is.Equal(w.log.count(refusal), 1) // said once while it stands
	due("")
	w.pass(time.Minute) // not refused now: staged
	due("not on the allow-list")
	w.pass(time.Minute)
	is.Equal(w.log.count(refusal), 2) // said again
}

// levelOf is the level message was said at.
func (l *fakeLogger) levelOf(message string) slog.Level {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.entries {
		if e.Message == message {
			return e.Level
		}
	}
	return slog.LevelDebug
}

// The plan shows each update a consumer is due as its act and step, refused ones with their
// reason, and with updates off, the drift it leaves.
func TestThePlanShowsTheUpdatesDue(t *testing.T) {
	is := is.New(t)
	w, _ := rolloutWorld(t, 2, domain.Config{})
	u := vectorUpdate()
	u.Refused = "the server has no update path from 0.8.0 to 0.8.6"
	w.backend.mu.Lock()
	w.backend.due["c01"] = []ports.Update{u}
	w.backend.mu.Unlock()
	w.configure(domain.Config{})
	plan, err := w.h.Preview(ctx)
	is.NoErr(err)
	is.Equal(plan.Consumers[0], domain.Planned{As: "c00", Act: domain.PlanUpdate, Why: []string{"update vector 0.8.0 -> 0.8.6"}})
	is.Equal(plan.Consumers[1], domain.Planned{As: "c01", Why: []string{"update vector 0.8.0 -> 0.8.6 refused: the server has no update path from 0.8.0 to 0.8.6"}})
	w.configure(domain.Config{Updates: domain.Off})
	plan, err = w.h.Preview(ctx)
	is.NoErr(err)
	is.Equal(plan.Consumers[0], domain.Planned{As: "c00", Why: []string{"extension vector 0.8.0, wanted 0.8.6; not updated (extension updates are off)"}})
}

// What was said of a consumer's refused change is forgotten once it is withdrawn: the memory
// does not grow with every consumer that ever went.
func TestWhatWasSaidOfAChangeGoesWithTheConsumer(t *testing.T) {
	is := is.New(t)
	w, _ := rolloutWorld(t, 2, domain.Config{})
	u := vectorUpdate()
	u.Key, u.Step, u.Refused = "extension vector -> 0.7.0", "update vector 0.8.0 -> 0.7.0", "never downgraded"
	w.backend.mu.Lock()
	w.backend.due["c00"], w.backend.due["c01"] = []ports.Update{u}, []ports.Update{u}
	w.backend.mu.Unlock()
	w.pass(time.Minute)
	is.Equal(w.h.SaidUpdates(), 2) // said of both
	w.contributions(consumer("c01", "/s/c01"))
	w.pass(time.Minute)
	w.pass(settle)
	is.Equal(len(w.backend.removes), 1) // c00 withdrawn
	is.Equal(w.h.SaidUpdates(), 1)      // and what was said of it forgotten
}
