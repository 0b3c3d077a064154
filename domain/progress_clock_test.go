package domain_test

import (
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/matryer/is"

	"github.com/novox/postgres-provider/domain"
)

// The loop's last progress is the real clock's time as it gave it, monotonic reading and all:
// how long ago it was is then measured on the monotonic clock (Go's time.Sub uses it where both
// times carry one), so that a wall clock stepped forward (+25 h) does not make a loop that gets
// on look stuck to /healthz and the watchdog, and one stepped back does not hide a stuck loop.
// It was rebuilt from wall-clock nanoseconds, which drops the monotonic reading.
func TestLastProgressKeepsTheMonotonicReading(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/letta", "pw")
	w.contributions(consumer("letta", "/s/letta"))
	h := domain.New(domain.Config{Resource: "postgres", Receives: receives}, w.fs, clock.New(), w.backend, nil, w.log)
	h.Reconcile(ctx)
	last := h.LastProgress()
	is.True(!last.IsZero())
	is.True(strings.Contains(last.String(), " m=")) // the monotonic reading is kept
	is.True(time.Since(last) >= 0)                  // and so measured on the monotonic clock
	is.True(time.Since(last) < time.Minute)
}
