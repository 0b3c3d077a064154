package domain

import "time"

// SetMaxFile sets how much the loop reads of the contributions file, for a test, and answers
// how to put it back.
func SetMaxFile(n int64) (restore func()) {
	was := maxFile
	maxFile = n
	return func() { maxFile = was }
}

// Parses counts how often the loop parsed the contributions file.
func (h *Harness) Parses() int { return h.file.parses }

// UntilNext is how long Run would wait for its next pass.
func (h *Harness) UntilNext() time.Duration { return h.untilNext() }

// SaidUpdates counts what the loop remembers having said of changes not made, by consumer and
// change.
func (h *Harness) SaidUpdates() int {
	h.told.mu.Lock()
	defer h.told.mu.Unlock()
	n := 0
	for k := range h.told.said {
		if k.about == aboutChange {
			n++
		}
	}
	return n
}
