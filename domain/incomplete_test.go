package domain_test

import (
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/domain"
)

// A consumer whose entry names an extension the backend does not make is made without it and
// is never shown as applied: its state is incomplete, with what it lacks, until the backend
// makes it; the plan names it and a single pass is not converged. The create is not a failure
// and is not retried: nothing a pass does mends it.
func TestConsumerLackingAnExtensionIsIncompleteUntilItIsMade(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.backend.unavailable = map[string]bool{"vector": true}
	w.write("/s/letta", "pw")
	w.contributions(consumer("letta", "/s/letta"))
	lacks := []string{"extension vector: not available on this server"}

	r := w.pass(0)
	is.Equal(r.Created, 1)  // made, as far as it can be
	is.Equal(r.Failures, 0) // not a failure
	is.Equal(r.Consumers["letta"], domain.StateIncomplete)
	is.Equal(r.Status[0].Lacks, lacks) // and what it lacks, from the create
	is.True(!r.Converged())            // a single pass did not do all it was asked

	plan := previewOf(t, w, domain.Config{})
	is.Equal(plan.Consumers[0].Act, domain.PlanIncomplete)
	is.Equal(plan.Consumers[0].Why, []string{"lacks " + lacks[0]})
	is.True(plan.Pending()) // provisioner plan exits 3

	r = w.pass(time.Minute) // a verify pass: the check says it still lacks it
	is.Equal(r.Consumers["letta"], domain.StateIncomplete)
	is.Equal(r.Status[0].Lacks, lacks)
	is.Equal(w.backend.createsOf("letta"), 1) // not applied again: that would not mend it

	w.backend.mu.Lock()
	w.backend.unavailable = nil // the server gains it
	w.backend.mu.Unlock()
	r = w.pass(time.Minute)
	is.Equal(r.Consumers["letta"], domain.StateApplied) // whole, by itself
	is.Equal(len(r.Status[0].Lacks), 0)
	is.True(r.Converged())
	plan = previewOf(t, w, domain.Config{})
	is.Equal(plan.Consumers[0].Act, "") // as asked
}

// The consumers-by-state list that metrics are made from names incomplete.
func TestStatesNameIncomplete(t *testing.T) {
	is := is.New(t)
	found := false
	for _, s := range domain.States {
		found = found || s == domain.StateIncomplete
	}
	is.True(found)
}
