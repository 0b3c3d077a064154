// Package domain is the reconcile loop every provider runs: read the consumers the mesh listed,
// bring each one's resource into being through the Backend under the password the mesh minted,
// check every verify interval that the backend still holds it, apply again what it lost (braking
// when applying again does not help), and withdraw what the mesh no longer asks for, on firm
// ground only: a file that was read whole and has settled, and a backend whose record of what it
// manages could be read.
//
// It depends only on package ports and the standard library.
package domain

import (
	"context"
	"crypto/sha256"
	"sync/atomic"
	"time"

	"github.com/novox/postgres-provider/ports"
)

// Defaults for the zero values of Config.
const (
	DefaultEvery          = 5 * time.Second
	DefaultVerifyEvery    = time.Minute
	DefaultHoldsTimeout   = 30 * time.Second
	DefaultWithdrawSettle = 10 * time.Second
)

// maxBackoff is the longest a braked consumer waits between checks.
const maxBackoff = time.Hour

// massFactor is how many times longer than Config.WithdrawSettle a withdrawal of more than half
// of the managed consumers waits for the file to settle.
const massFactor = 6

// Policy is what withdrawing a consumer the mesh no longer lists does.
type Policy string

const (
	// Retain takes the login away; the data stays, and listing the consumer again gives the
	// login back.
	Retain Policy = "retain"
	// Drop takes the login away, and once the consumer has stayed withdrawn for
	// Config.DropAfter, drops everything it had.
	Drop Policy = "drop"
)

// Config is the loop's settings. Zero durations take the defaults above, but DropAfter, whose
// zero drops at once.
type Config struct {
	// Resource is the requirement this provider serves, e.g. "postgres".
	Resource string
	// Receives is the path of the contributions file.
	Receives string
	// Every is the time between passes.
	Every time.Duration
	// VerifyEvery is how often applied consumers are checked.
	VerifyEvery time.Duration
	// HoldsTimeout bounds each check, reading the backend's record, and the pass under way
	// when Run's context ends.
	HoldsTimeout time.Duration
	// OnWithdraw is Retain (the zero value) or Drop.
	OnWithdraw Policy
	// DropAfter is how long a consumer stays withdrawn before Drop drops it; zero drops at once.
	DropAfter time.Duration
	// WithdrawSettle is how long the contributions file must have stayed unchanged before a
	// consumer it no longer lists is withdrawn: a file rewritten in place passes through
	// states that list only part of it.
	WithdrawSettle time.Duration
	// Parallel is how many backend calls of different consumers run at once; zero is one.
	Parallel int
	// Once is set where the loop runs a single pass: its lines do not promise a retry.
	Once bool
	// Updates is what the loop does with the staged changes a backend reports (an
	// extension's newer version): Staged (the zero value) or Off.
	Updates UpdatePolicy
	// Canaries is how many consumers take a change new to the provider first; zero is one.
	Canaries int
	// Soak is how long the canaries must hold a new change before the rest follow; zero is
	// DefaultSoak, a negative one none.
	Soak time.Duration
	// LoginCheckEvery is how often at least each consumer's password is checked by logging
	// in, where the backend checks it so (ports.LoginChecker); zero is DefaultLoginCheckEvery.
	LoginCheckEvery time.Duration
	// LoginRate is the most of those logins granted within any second; zero is
	// DefaultLoginRate.
	LoginRate int
	// InsideCheckEvery is how often at least what is inside each consumer's database (its
	// extensions) is looked at, on a budget of its own; zero, or no more than VerifyEvery, looks
	// at every check (Provision.SkipInside never set).
	InsideCheckEvery time.Duration
	// InsideRate is the most of those looks granted within any second; zero is
	// DefaultInsideRate.
	InsideRate int
}

// Harness is the reconcile loop's settings and memory. What it remembers of the backend is a
// cache of what the backend says: at a start, and whenever this replica takes the lease, it is
// read again. One goroutine calls Run or Reconcile; LastProgress may be called from any.
type Harness struct {
	cfg     Config
	fs      ports.Filesystem
	clock   ports.Clock
	backend ports.Backend
	lease   ports.Lease
	log     ports.Logger
	told    *Told // log, which says a consumer's facts once

	// consumers is everything the loop knows of each login.
	consumers store
	// file is the contributions file as last read; listedFor is the digest of the file the
	// consumers' listing was taken from, and watched the files worth watching for it.
	file      contents
	listedFor [sha256.Size]byte
	watched   []string

	verifiedAt time.Time
	recordRead bool // read since the start, or since the lease was taken
	acting     bool // held the lease on the last pass
	retry      atomic.Bool
	// watching, where set (WatchedBy), says whether a change to every file of the last
	// Report's Watched wakes Run; woken is whether one did (or SIGHUP) since the last pass; and
	// lookAtSecrets is whether this pass looks at each secret known (a stat each) or takes it
	// as last read.
	watching      func() bool
	woken         atomic.Bool
	lookAtSecrets bool
	// resume is where the last pass's checks stopped (a position in the file): the next pass
	// starts there, so that a timeout never leaves the consumers after it unchecked for good.
	resume int
	// shared is, per cause many consumers met in one pass, the line said for all of them.
	shared map[string]*repeat
	// sharedTold is, per cause of shared, the consumers its line has counted: one newly meeting
	// it is counted into it at once, not at the line's next repeat.
	sharedTold map[string]map[string]bool
	// folders are the folders of secrets that cannot be entered that several consumers met on
	// the last pass, by folder.
	folders map[string]*folderCause
	// deferred are the lines of reading the file, said after whether it is readable again.
	deferred []ports.Entry

	// What a pass reuses from the one before: its items, and the report's views of the
	// consumers (made anew when one changed), and how many views were handed out.
	items      []item
	itemPtrs   []*item
	viewStates map[string]State
	viewStatus []*Status
	published  uint64

	// noneLeaving is consumers.changes when the last look found nobody leaving, which holds
	// until it changes or nextDrop.
	noneLeaving int
	nextDrop    time.Time
	// heldUntil is when a withdrawal held for the file to settle is due, if the file stays
	// as it is; zero when none is held.
	heldUntil time.Time
	server    repeat        // the backend's problem as a whole, while it lasts
	mass      bool          // a mass withdrawal is being held, and was said
	peak      peaks         // the most consumers managed within the last hour
	peakRead  bool          // peak was rebuilt from the record since the start, or the lease was taken
	stages    stager        // the staged changes' rollouts
	budgets   [parts]budget // the costly parts of a check, each on its budget (budgets.go)

	progress atomic.Pointer[time.Time] // the loop's last step, by its clock, with its monotonic reading
	doing    progress                  // where the pass under way stands (progress.go)
	copyBuf  [64 << 10]byte
}

// New returns a loop that reads through fs, takes time from clk, provisions through backend and
// says what it does to log. lease may be nil: a single replica always acts.
func New(cfg Config, fs ports.Filesystem, clk ports.Clock, backend ports.Backend, lease ports.Lease, log ports.Logger) *Harness {
	if cfg.Every <= 0 {
		cfg.Every = DefaultEvery
	}
	if cfg.VerifyEvery <= 0 {
		cfg.VerifyEvery = DefaultVerifyEvery
	}
	if cfg.HoldsTimeout <= 0 {
		cfg.HoldsTimeout = DefaultHoldsTimeout
	}
	if cfg.WithdrawSettle <= 0 {
		cfg.WithdrawSettle = DefaultWithdrawSettle
	}
	if cfg.OnWithdraw == "" {
		cfg.OnWithdraw = Retain
	}
	cfg.Parallel = max(cfg.Parallel, 1)
	switch {
	case cfg.Soak == 0:
		cfg.Soak = DefaultSoak
	case cfg.Soak < 0:
		cfg.Soak = 0
	}
	cfg.Canaries = max(cfg.Canaries, 1)
	if cfg.LoginCheckEvery <= 0 {
		cfg.LoginCheckEvery = DefaultLoginCheckEvery
	}
	if cfg.LoginRate <= 0 {
		cfg.LoginRate = DefaultLoginRate
	}
	if cfg.InsideRate <= 0 {
		cfg.InsideRate = DefaultInsideRate
	}
	told, ok := log.(*Told) // the backend's too, where app gave both the same
	if !ok {
		told = NewTold(log)
	}
	h := &Harness{cfg: cfg, fs: fs, clock: clk, backend: backend, lease: lease, log: told, told: told}
	h.budgets[login] = budget{every: cfg.LoginCheckEvery, rate: cfg.LoginRate}
	h.budgets[inside] = budget{every: max(cfg.InsideCheckEvery, 0), rate: cfg.InsideRate}
	h.consumers = newStore()
	h.stages = newStager()
	h.forgetAll()
	h.step() // a loop that never gets going is stuck from its start
	return h
}

// forgetAll drops what the loop remembers of the backend and of each consumer: it is read
// again from the backend. When each consumer was first seen withdrawn stays: a drop's delay is
// never shortened by reading the record again.
func (h *Harness) forgetAll() {
	for as, c := range h.consumers.by {
		if c.left().seenWithdrawn.IsZero() {
			h.consumers.forget(c)
			continue
		}
		h.consumers.by[as] = &consumer{as: as, leaving: &leaving{seenWithdrawn: c.leaving.seenWithdrawn}}
		h.consumers.setPassword(c, "")
	}
	h.consumers.changes++
	h.consumers.dirty = true
	h.verifiedAt, h.recordRead = time.Time{}, false
	h.peak, h.peakRead = peaks{}, false // rebuilt from the record: another replica may have withdrawn meanwhile
	h.resume, h.shared, h.sharedTold = 0, map[string]*repeat{}, map[string]map[string]bool{}
	h.listedFor = [sha256.Size]byte{}
	h.watched = nil
}

// RetryNow has the next pass try at once every consumer whose create was refused or asked for
// what cannot be made, whatever is left of its wait: what SIGHUP asks for. It may be called
// from any goroutine.
func (h *Harness) RetryNow() { h.retry.Store(true) }

// WatchedBy tells the loop, before Run, how to know that its wake-ups cover the files: complete
// answers whether a change to any file the last Report named in Watched wakes Run (every folder
// watched). While it does, a pass the timer started takes each secret it knows as last read,
// and only a pass a wake-up, SIGHUP or a verify pass started looks at each again: at 100,000
// consumers that is 100,000 stats a pass (0.35 s of CPU), every Every. A change no watch sees
// (a network filesystem's, written on another host) is seen at the next verify pass.
func (h *Harness) WatchedBy(complete func() bool) { h.watching = complete }

// Run reconciles until ctx ends: a pass every Config.Every (sooner where a withdrawal or a drop
// falls due), and one as soon as wake delivers (nil never does). observe, when not nil, is given each pass's Report. A pass under way when ctx ends
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
		case <-h.clock.After(h.untilNext()):
		case <-wake:
			h.woken.Store(true)
		}
	}
}

// untilNext is how long Run waits for its next pass: Every, or less where a held withdrawal or
// a drop falls due sooner, so that it happens when due and not up to Every later, and at most a
// second where login checks due are waiting for the budget's room.
func (h *Harness) untilNext() time.Duration {
	wait, now := h.cfg.Every, h.clock.Now()
	if h.backlog() {
		wait = min(wait, time.Second)
	}
	for _, due := range []time.Time{h.heldUntil, h.nextDrop} {
		if due.After(now) && due.Sub(now) < wait { // one already past is waiting on something else
			wait = due.Sub(now)
		}
	}
	return wait
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

// LastProgress is when the loop last got on: a pass started or ended, or a call to the backend
// returned. A loop that makes no progress for long is stuck. The time is the clock's as it
// gave it: from a real clock it keeps its monotonic reading, so that how long ago it was
// (time.Since, or Sub of a time.Now) is measured on the monotonic clock, and a wall clock
// stepped either way neither makes a loop that gets on look stuck nor hides one that is.
func (h *Harness) LastProgress() time.Time {
	if t := h.progress.Load(); t != nil {
		return *t
	}
	return time.Time{}
}

func (h *Harness) step() {
	now := h.clock.Now()
	h.progress.Store(&now)
}
