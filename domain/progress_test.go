package domain_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

func TestProgressSaysWhereALongPassStands(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.list("a", "b", "c", "d")
	var seen []domain.Progress
	var at []time.Time
	w.backend.createFn = func(context.Context, ports.Provision) {
		seen, at = append(seen, w.h.Progress()), append(at, w.clk.Now()) // as a watcher would find it, while the call runs
		w.clk.Add(2 * time.Second)                                       // each create takes 2 s
	}
	start := w.clk.Now()
	r := w.pass(0)
	is.Equal(r.Created, 4)
	is.Equal(len(seen), 4)
	third := seen[2]
	is.True(third.Running)
	is.Equal(third.Pass, int64(1))
	is.Equal(third.Doing, "creating")
	is.Equal([]int{third.Done, third.Of, third.Created}, []int{2, 4, 2}) // two returned of four, counted as created
	is.Equal(third.Started, start)
	left, ok := third.Left(at[2])
	is.True(ok)
	is.Equal(left, 4*time.Second) // 2 s a create, two to go

	after := w.h.Progress()
	is.True(!after.Running)            // between passes
	is.Equal(after.Created, r.Created) // what the counts said is what the Report says
	_, ok = after.Left(w.clk.Now())
	is.True(!ok)

	// The next pass counts from zero: a consumer lost is applied again.
	var during domain.Progress
	w.backend.createFn = func(context.Context, ports.Provision) { during = w.h.Progress() }
	w.backend.lose("b")
	r = w.pass(domain.DefaultVerifyEvery)
	is.Equal(r.Reapplied, 1)
	is.Equal(during.Doing, "applying again")
	p := w.h.Progress()
	is.Equal(p.Pass, int64(2))
	is.Equal([]int{p.Created, p.Reapplied, p.Failures}, []int{0, 1, 0}) // as the Report counts them
	is.Equal(p.Doing, "settling")                                       // its last step named, not the one before
}

// Issue 39, case 3: progress names the phase the pass is in, and a batch of checks counts its
// answers as they come rather than standing at 0 of N until the whole batch returns.
func TestProgressNamesItsPhaseAndCountsChecksAsTheyAreAnswered(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.list("a", "b", "c", "d", "e")
	w.pass(0)
	var seen []domain.Progress
	w.backend.holdsFn = func(context.Context, ports.Provision) error {
		seen = append(seen, w.h.Progress())
		return nil
	}
	w.pass(domain.DefaultVerifyEvery)
	is.Equal(len(seen), 5)
	for i, p := range seen {
		is.Equal(p.Doing, "checking")
		is.Equal([]int{p.Done, p.Of}, []int{i, 5}) // each answer counted as it comes
	}
	p := w.h.Progress()
	is.Equal([]int{p.Done, p.Of}, []int{0, 0}) // settled: "settling", one step
	is.Equal(p.Doing, "settling")
}

func TestProgressBeforeACallReturnedHasNoEstimate(t *testing.T) {
	is := is.New(t)
	p := domain.Progress{Running: true, Doing: "creating", Of: 10}
	_, ok := p.Left(time.Now())
	is.True(!ok) // nothing to go on yet
}

// A staged change let through for a consumer that is held is made by a Create, which is no
// re-apply, and whose failed update halts its rollout rather than counting as a failure: the
// Progress counts what the Report counts, so the counters that move with it agree with it.
func TestProgressCountsAStagedChangeAsTheReportDoes(t *testing.T) {
	is := is.New(t)
	w, _ := rolloutWorld(t, 3, domain.Config{Soak: -1})
	r := w.pass(time.Minute) // the canary updated, then the rest at once (no soak)
	is.True(len(w.backend.updates()) > 0)
	p := w.h.Progress()
	is.Equal([]int{p.Created, p.Reapplied, p.Failures}, []int{r.Created, r.Reapplied, r.Failures})

	w, _ = rolloutWorld(t, 3, domain.Config{})
	w.backend.mu.Lock()
	w.backend.failUpdate = map[string]string{"extension vector -> 0.8.6": "division by zero"}
	w.backend.mu.Unlock()
	r = w.pass(time.Minute) // the canary's update fails: its rollout halts
	is.Equal(len(r.Rollouts), 1)
	is.True(r.Rollouts[0].Halted != "")
	p = w.h.Progress()
	is.Equal([]int{p.Created, p.Reapplied, p.Failures}, []int{r.Created, r.Reapplied, r.Failures})
}

// Issue 39, case 3: the first pass lists the file's consumers as it goes (each as its create
// returned, the rest unchecked), where /status said [] until it settled; later passes leave it
// to the last Report.
func TestTheFirstPassListsItsConsumersAsTheySettle(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.list("a", "b", "c")
	w.backend.createErr = map[string]error{"b": fmt.Errorf("create role b: no: %w", ports.ErrRefused)}
	var seen [][]domain.Status
	w.backend.createFn = func(context.Context, ports.Provision) { seen = append(seen, w.h.Settling()) }
	w.pass(0)
	is.Equal(len(seen), 3)
	states := func(l []domain.Status) []string {
		var out []string
		for _, s := range l {
			out = append(out, s.As+" "+string(s.State))
		}
		return out
	}
	is.Equal(states(seen[0]), []string{"a unchecked", "b unchecked", "c unchecked"}) // listed at once
	is.Equal(states(seen[2]), []string{"a applied", "b refused", "c unchecked"})     // each as its create returned
	is.Equal(w.h.Settling(), nil)                                                    // between passes: the Report's

	seen = nil
	w.write("/s/a", "rotated")
	w.pass(domain.DefaultEvery)
	is.True(len(seen) >= 1) // a's new password, and b's next try
	for _, l := range seen {
		is.Equal(l, nil) // a later pass keeps no list: the last Report stands
	}
}
