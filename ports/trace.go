package ports

import "context"

// CheckTrace is told, while a HoldsAll runs, how many of its checks have been answered: a
// batch of a thousand checks inside databases takes a minute, and the loop's progress
// ("checking: 400 of 1,000") moves while it does. It rides on the context, as
// net/http/httptrace's ClientTrace does, so that the method's signature stays what it asks; a
// backend that never tells it leaves the count at what the loop sets when the batch returns.
type CheckTrace struct {
	// Answered is called with how many more checks have been answered (held, not held, or an
	// error); it may be called from any goroutine, and never counts one check twice.
	Answered func(n int)
}

type checkTraceKey struct{}

// WithCheckTrace is ctx carrying t, for a HoldsAll to tell.
func WithCheckTrace(ctx context.Context, t *CheckTrace) context.Context {
	return context.WithValue(ctx, checkTraceKey{}, t)
}

// Answered tells the CheckTrace ctx carries, if any, that n more checks have been answered.
func Answered(ctx context.Context, n int) {
	if t, _ := ctx.Value(checkTraceKey{}).(*CheckTrace); t != nil && t.Answered != nil && n > 0 {
		t.Answered(n)
	}
}
