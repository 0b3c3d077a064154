// Package poll is how the tests wait for what happens elsewhere (a server, a daemon, another
// session): they ask for the real condition until it holds, with a deadline, rather than sleep
// and hope. It is the one polling helper of the tests and of make compare.
package poll

import (
	"context"
	"fmt"
	"time"
)

// Every is how often Within and Eventually ask: soon after a condition holds, a wait ends;
// asking costs next to nothing.
const Every = 20 * time.Millisecond

// Until asks cond every interval until it holds, and answers nil; or until cond fails, ctx ends,
// or limit has passed since the first ask, and answers cond's error, ctx's, or one that names
// what was waited for.
func Until(ctx context.Context, what string, limit, interval time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s", what, limit)
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Within answers whether cond held within limit, asking every Every.
func Within(limit time.Duration, cond func() bool) bool {
	return Until(context.Background(), "", limit, Every, func() (bool, error) { return cond(), nil }) == nil
}

// T is the part of testing.TB that Eventually needs.
type T interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Eventually fails t, saying "never: " and what, unless cond holds within limit.
func Eventually(t T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	if !Within(limit, cond) {
		t.Fatalf("never: %s", what)
	}
}
