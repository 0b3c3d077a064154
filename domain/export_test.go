package domain

// SetMaxFile sets how much the loop reads of the contributions file, for a test, and answers
// how to put it back.
func SetMaxFile(n int64) (restore func()) {
	was := maxFile
	maxFile = n
	return func() { maxFile = was }
}

// Parses counts how often the loop parsed the contributions file.
func (h *Harness) Parses() int { return h.file.parses }
