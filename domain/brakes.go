package domain

import "time"

// brake is a consumer that checks found lost: times re-applies in a row, and the next check not
// before nextAt.
type brake struct {
	times  int
	nextAt time.Time
}

// backoff is how long a consumer applied again n times in a row waits for its next check: the
// verify interval doubled per repeat after the first, capped at maxBackoff. Doubling stops at the
// cap, so no repeat count overflows.
func backoff(verifyEvery time.Duration, n int) time.Duration {
	wait := verifyEvery
	for i := 1; i < n && wait < maxBackoff; i++ {
		wait *= 2
	}
	return min(wait, maxBackoff)
}
