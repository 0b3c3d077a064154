// Package domain is the reconcile loop every provider runs: read the consumers the mesh listed,
// bring each one's resource into being through the Backend under the password the mesh minted,
// check every verify interval that the backend still holds it, apply again what it lost (braking
// when applying again does not help), and withdraw what the mesh no longer asks for.
//
// It depends only on package ports and the standard library.
package domain

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/novox/postgres-provider/ports"
)

// Defaults for the zero values of Config.
const (
	DefaultEvery        = 5 * time.Second
	DefaultVerifyEvery  = time.Minute
	DefaultHoldsTimeout = 30 * time.Second
)

// maxBackoff is the longest a braked consumer waits between checks.
const maxBackoff = time.Hour

// How many passes a secret may be unreadable before it stops being called a race, and once said
// loudly, how often it is repeated. The same cadence quiets a create that keeps failing the same
// way.
const (
	patiently   = 12
	loudlyEvery = 240
)

// Config is the loop's settings. Zero durations take the defaults above.
type Config struct {
	// Resource is the requirement this provider serves, e.g. "postgres".
	Resource string
	// Receives is the path of the contributions file.
	Receives string
	// Every is the time between passes.
	Every time.Duration
	// VerifyEvery is how often applied consumers are checked with Backend.Holds.
	VerifyEvery time.Duration
	// HoldsTimeout bounds each Holds call, and the pass under way when Run's context ends.
	HoldsTimeout time.Duration
}

// Harness is the reconcile loop's settings and memory. It is not safe for concurrent use: one
// goroutine calls Run or Reconcile.
type Harness struct {
	cfg     Config
	fs      ports.Filesystem
	clock   ports.Clock
	backend ports.Backend
	log     ports.Logger

	verifiedAt  time.Time
	applied     map[string]appliedEntry
	lost        map[string]brake
	waiting     map[string]int
	failing     map[string]failure
	twice       map[string]bool
	passwords   map[string]string
	lastWarning string
}

type appliedEntry struct {
	hash    [sha256.Size]byte
	derived map[string]any
}

// brake is a consumer that holds reported lost: times re-applies in a row, and the next check
// not before nextAt.
type brake struct {
	times  int
	nextAt time.Time
}

type failure struct {
	text  string
	times int
}

// New returns a loop that reads through fs, takes time from clk, provisions through backend and
// says what it does to log.
func New(cfg Config, fs ports.Filesystem, clk ports.Clock, backend ports.Backend, log ports.Logger) *Harness {
	if cfg.Every <= 0 {
		cfg.Every = DefaultEvery
	}
	if cfg.VerifyEvery <= 0 {
		cfg.VerifyEvery = DefaultVerifyEvery
	}
	if cfg.HoldsTimeout <= 0 {
		cfg.HoldsTimeout = DefaultHoldsTimeout
	}
	return &Harness{
		cfg: cfg, fs: fs, clock: clk, backend: backend, log: log,
		applied:   map[string]appliedEntry{},
		lost:      map[string]brake{},
		waiting:   map[string]int{},
		failing:   map[string]failure{},
		twice:     map[string]bool{},
		passwords: map[string]string{},
	}
}

// Run reconciles until ctx ends: a pass every Config.Every, and one as soon as wake delivers (nil
// never does). observe, when not nil, is given each pass's Report. A pass under way when ctx ends
// finishes, bounded by HoldsTimeout; then Run returns.
func (h *Harness) Run(ctx context.Context, wake <-chan struct{}, observe func(Report)) {
	for {
		r := h.pass(ctx)
		if observe != nil {
			observe(r)
		}
		select {
		case <-ctx.Done():
			return
		case <-h.clock.After(h.cfg.Every):
		case <-wake:
		}
	}
}

// pass is one Reconcile whose context outlives ctx by HoldsTimeout, so that a stop asked for in
// the middle of a pass lets it finish what it started.
func (h *Harness) pass(ctx context.Context) Report {
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() { h.clock.AfterFunc(h.cfg.HoldsTimeout, cancel) })
	defer stop()
	return h.Reconcile(pctx)
}

// Reconcile is one pass. One consumer's failure never stops the others'.
func (h *Harness) Reconcile(ctx context.Context) (r Report) {
	start := h.clock.Now()
	defer func() { r.Took = h.clock.Now().Sub(start) }()
	r.Watched = []string{h.cfg.Receives}
	given := h.readContributions()
	if given == nil {
		return r
	}
	r.FileRead, r.Consumers = true, make(map[string]State, len(given))
	want := make(map[string]bool, len(given))
	for _, g := range given {
		want[g.As] = true
		r.Watched = append(r.Watched, g.Secret)
	}
	h.forget(want)

	verifying := h.clock.Now().Sub(h.verifiedAt) >= h.cfg.VerifyEvery
	if verifying {
		h.verifiedAt = h.clock.Now()
	}
	for _, g := range given {
		var timedOut bool
		r.Consumers[g.As], timedOut = h.reconcile(ctx, g, verifying, &r)
		if timedOut {
			verifying = false
		}
	}
	h.withdraw(ctx, want, &r)
	return r
}

// reconcile brings one consumer to what g says. It answers the consumer's state, and whether a
// Holds timed out, so that the rest of the pass does not ask a backend that will time out again.
func (h *Harness) reconcile(ctx context.Context, g contribution, verifying bool, r *Report) (State, bool) {
	secret, err := h.readFile(g.Secret)
	if err != nil {
		h.secretUnreadable(g, err)
		return StateWaitingForSecret, false
	}
	delete(h.waiting, g.As)
	pw := password(secret)
	h.passwords[g.As] = pw
	p := ports.Provision{As: g.As, Password: pw, Values: orEmpty(g.Values), Derived: orEmpty(g.Derived), At: g.At, Consumer: g.Node}
	hash := hashOf(p)

	reapplying := 0
	if was, ok := h.applied[g.As]; ok && was.hash == hash {
		if !verifying {
			return h.state(g.As), false
		}
		b, braked := h.lost[g.As]
		if braked && h.clock.Now().Before(b.nextAt) {
			return h.state(g.As), false
		}
		hctx, cancel := h.clock.WithTimeout(ctx, h.cfg.HoldsTimeout)
		held, err := h.backend.Holds(hctx, p)
		timedOut := errors.Is(hctx.Err(), context.DeadlineExceeded)
		cancel()
		if err != nil {
			// Unable to ask is not evidence of loss.
			r.Unchecked++
			h.say(slog.LevelWarn, g.As, "%s: could not check the backend, will ask again: %s", g.As, err)
			return h.state(g.As), timedOut
		}
		if held {
			delete(h.lost, g.As)
			return StateApplied, false
		}
		reapplying = b.times + 1
		if reapplying == 1 {
			h.say(slog.LevelWarn, g.As, "%s: the backend no longer holds it; applying again", g.As)
		} else {
			h.say(slog.LevelWarn, g.As, "%s: still not held after being applied again (%d times in a row) — create does not "+
				"produce what holds checks; applying again", g.As, reapplying)
		}
	}

	if err := h.backend.Create(ctx, p); err != nil {
		r.Failures++
		h.createFailed(g.As, err)
		if reapplying > 0 {
			// The brake keeps its count: the next check may apply again at once.
			h.lost[g.As] = brake{times: reapplying - 1}
		}
		return StateFailing, false
	}
	if f, was := h.failing[g.As]; was {
		h.say(slog.LevelInfo, g.As, "%s: created, after %d failed attempt(s)", g.As, f.times)
		delete(h.failing, g.As)
	}
	h.applied[g.As] = appliedEntry{hash: hash, derived: p.Derived}
	if reapplying == 0 {
		r.Created++
		delete(h.lost, g.As)
		return StateApplied, false
	}
	r.Reapplied++
	wait := backoff(h.cfg.VerifyEvery, reapplying)
	h.lost[g.As] = brake{times: reapplying, nextAt: h.clock.Now().Add(wait)}
	if reapplying > 1 {
		h.say(slog.LevelWarn, g.As, "%s: next check in %s", g.As, wait.Round(time.Second))
	}
	return StateBraked, false
}

// secretUnreadable counts a pass on which g's secret could not be read and says so: patiently
// at first (the host may write it after the contributions file), then loudly, then rarely.
func (h *Harness) secretUnreadable(g contribution, err error) {
	n := h.waiting[g.As] + 1
	h.waiting[g.As] = n
	switch {
	case n <= patiently:
		h.say(slog.LevelInfo, g.As, "%s: secret not readable yet (%s): %v", g.As, g.Secret, err)
	case n == patiently+1 || n%loudlyEvery == 0:
		h.say(slog.LevelError, g.As, "%s: CANNOT READ the secret after %d attempts (%s): %v. This is not a race any more — "+
			"nothing has been provisioned for this consumer and nothing will be until somebody looks. "+
			"Check who owns the file and who this process runs as (novox/hq issue 225)", g.As, n, g.Secret, err)
	}
}

// createFailed says a failed create the first time, and while it fails the same way, every
// loudlyEvery-th time; a different error starts the count again.
func (h *Harness) createFailed(as string, err error) {
	text := scrub(err.Error(), h.passwords[as])
	f := h.failing[as]
	if f.text != text {
		f = failure{text: text}
	}
	f.times++
	h.failing[as] = f
	if f.times == 1 || f.times%loudlyEvery == 0 {
		h.say(slog.LevelWarn, as, "%s: create failed, will retry: %s", as, text)
	}
}

// withdraw removes, in a stable order, every login this process applied that the file no longer
// lists. A failed remove is tried again next pass.
func (h *Harness) withdraw(ctx context.Context, want map[string]bool, r *Report) {
	gone := make([]string, 0)
	for as := range h.applied {
		if !want[as] {
			gone = append(gone, as)
		}
	}
	sort.Strings(gone)
	for _, as := range gone {
		h.say(slog.LevelInfo, as, "%s: no longer in %s; withdrawing it from the backend", as, h.cfg.Receives)
		if err := h.backend.Remove(ctx, as, h.applied[as].derived); err != nil {
			r.Failures++
			h.say(slog.LevelWarn, as, "%s: remove failed, will retry: %v", as, err)
			continue
		}
		r.Withdrawn++
		delete(h.applied, as)
		delete(h.lost, as)
		delete(h.passwords, as)
	}
}

// forget drops what the loop counted for consumers that left the file. What was applied stays
// until it is withdrawn.
func (h *Harness) forget(want map[string]bool) {
	for as := range h.failing {
		if !want[as] {
			delete(h.failing, as)
		}
	}
	for as := range h.waiting {
		if !want[as] {
			delete(h.waiting, as)
		}
	}
	for as := range h.passwords {
		if _, applied := h.applied[as]; !want[as] && !applied {
			delete(h.passwords, as)
		}
	}
}

// state is what the loop knows of an applied consumer it did not touch this pass.
func (h *Harness) state(as string) State {
	if _, failing := h.failing[as]; failing {
		return StateFailing
	}
	if b, braked := h.lost[as]; braked && b.times > 0 {
		return StateBraked
	}
	return StateApplied
}

// say logs one line, with every password the loop knows scrubbed from it.
func (h *Harness) say(level slog.Level, consumer, format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	for _, pw := range h.passwords {
		text = scrub(text, pw)
	}
	h.log.Log(ports.Entry{Level: level, Consumer: consumer, Message: text})
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

// hashOf is the fingerprint of what a consumer asked for. Derived is in it: a provider that
// renames what it derives gave a different resource. It is a digest, so the loop's memory does
// not keep the password in it.
func hashOf(p ports.Provision) [sha256.Size]byte {
	b, _ := json.Marshal([]any{p.As, p.Password, p.Values, p.Derived})
	return sha256.Sum256(b)
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
