package domain

import (
	"crypto/sha256"
	"time"
)

// brake is a consumer that checks found lost: times re-applies in a row, and the next check not
// before nextAt.
type brake struct {
	times  int
	nextAt time.Time
}

// backoff is how long a consumer applied again n times in a row waits for its next check: the
// verify interval doubled per repeat after the first, capped at maxBackoff.
func backoff(verifyEvery time.Duration, n int) time.Duration {
	return doubled(verifyEvery, n, maxBackoff)
}

// doubled is base doubled per time after the first of n, at most ceiling. Doubling stops at the
// ceiling, so no count overflows.
func doubled(base time.Duration, n int, ceiling time.Duration) time.Duration {
	wait := base
	for i := 1; i < n && wait < ceiling; i++ {
		wait *= 2
	}
	return min(wait, ceiling)
}

// maxRefusedWait is the longest a consumer whose create was refused waits before it is tried
// again: somebody may mend the backend (rename a role back) without saying so.
const maxRefusedWait = 5 * time.Minute

// invalidWait is how long a consumer that asks for what cannot be made (ports.ErrInvalid: a
// bad name, a setting off --allow-settings, a value the server rejects) waits before it is
// tried again. Only its entry changing or SIGHUP can mend it, and each ask puts an ERROR in
// the server's log: tried again hourly, in case the server itself changed.
const invalidWait = time.Hour

// refusal is a consumer whose create was refused (ports.ErrRefused) or invalid
// (ports.ErrInvalid): times in a row, what it asked for then (hash), and when it is tried
// again. Asking again changes nothing until somebody changes the backend or the entry, so it is
// not asked on every pass; what it asks for changing ends the wait.
type refusal struct {
	hash   [sha256.Size]byte
	times  int
	nextAt time.Time
}

// refusedWait is how long a consumer refused n times in a row waits: every, doubled per
// refusal after the first, at most maxRefusedWait; one whose entry is invalid, invalidWait.
func refusedWait(every time.Duration, n int, invalid bool) time.Duration {
	if invalid {
		return invalidWait
	}
	return doubled(every, n, maxRefusedWait)
}
