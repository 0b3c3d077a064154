package domain_test

import (
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

// A drop the backend holds for its archive: under way, said once and asked again each pass; failed,
// said as a failure and tried again after a back-off that doubles; then dropped.
func TestADropHeldForItsArchiveIsSaidOnceAndBacksOffWhenItFails(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.configure(domain.Config{OnWithdraw: domain.Drop, DropAfter: time.Hour})
	w.write("/s/letta", "pw")
	w.contributions(consumer("letta", "/s/letta"))
	w.pass(0)
	w.contributions()
	w.pass(0)
	w.pass(settle) // withdrawn
	w.log.take()

	w.backend.dropErr = &ports.DropHeld{Reason: "archiving database letta as /a/letta.dump first, under way since T"}
	r := w.pass(time.Hour)
	is.Equal(r.Failures, 0) // an archive under way is no failure
	is.Equal(w.log.take(), []string{"letta: withdrawn 1h0m0s ago; dropping it from the backend",
		"letta: drop held: archiving database letta as /a/letta.dump first, under way since T"})
	r = w.pass(5 * time.Second)
	is.Equal(len(w.log.take()), 0) // said once
	is.Equal(len(w.backend.drops), 2)
	is.Equal(r.Leaving[0].State, domain.LeavingArchiving)

	w.backend.dropErr = &ports.DropHeld{Failed: true, Reason: "archive failed: write /a/.letta.dump.partial: no space left on device"}
	r = w.pass(5 * time.Second)
	is.Equal(r.Failures, 1)
	is.Equal(w.log.take(), []string{"letta: drop held: archive failed: write /a/.letta.dump.partial: no space left on device; tried again in 1m0s"})
	is.Equal(r.Leaving[0].State, domain.LeavingFailing)
	w.pass(30 * time.Second)
	is.Equal(len(w.backend.drops), 3) // not before its minute
	w.pass(31 * time.Second)
	is.Equal(len(w.backend.drops), 4) // then tried again, failing again: two minutes
	w.pass(61 * time.Second)
	is.Equal(len(w.backend.drops), 4)

	w.backend.dropErr = nil
	r = w.pass(60 * time.Second)
	is.Equal(len(w.backend.drops), 5)
	is.Equal(r.Dropped, 1)
}
