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

	verifiedAt time.Time
	applied    map[string]appliedEntry
	record     map[string]ports.Managed // the backend's record, as last read and since kept up
	recordRead bool                     // read since the start, or since the lease was taken
	acting     bool                     // held the lease on the last pass

	lost      map[string]brake
	waiting   map[string]int
	failing   map[string]*repeat
	refused   map[string]*repeat
	removing  map[string]*repeat
	twice     map[string]bool
	passwords map[string]string
	secretIdx secretIndex // h.passwords, indexed to scrub in linear time
	secrets   map[string]secretMemo
	status    map[string]*Status

	// refusals are the consumers whose create was refused, or asked for what cannot be made:
	// tried again as their wait runs out, at once when what they ask for changes, or on
	// RetryNow. retry is RetryNow's request, taken by the next pass.
	refusals map[string]*refusal
	retry    atomic.Bool
	// unasked are the consumers whose check was not answered on the last pass (not made
	// after a timeout, or timed out itself for the first time this verify round), with how
	// often their own check timed out this round: the next pass asks them, starting at resume
	// (a position in the file) where the last one stopped.
	unasked map[string]int
	resume  int
	// uncheckable is, per consumer, the check error last said; shared, per cause many
	// consumers met in one pass, the line said for all of them.
	uncheckable map[string]*repeat
	shared      map[string]*repeat
	// deferred are the lines of reading the file, said after whether it is readable again.
	deferred []ports.Entry

	file        contents
	lastWarning string

	// What a pass reuses from the one before: the listed logins and files to watch (made anew
	// when the file changes), its items, and the report's views of the consumers (when one
	// changed).
	want       map[string]bool
	wantFor    [sha256.Size]byte
	watched    []string
	items      []item
	itemPtrs   []*item
	viewStates map[string]State
	viewStatus []Status
	dirty      bool

	// changes counts changes to what is listed, applied or recorded; noneLeaving is its value
	// when leaving last found nobody to withdraw, which holds until it changes or nextDrop.
	changes, noneLeaving int
	nextDrop             time.Time
	server               repeat // the backend's problem as a whole, while it lasts
	mass                 bool   // a mass withdrawal is being held, and was said
	peak                 peaks  // the most consumers managed within the last hour
	// seenWithdrawn is when this process first saw each recorded consumer withdrawn: a
	// drop waits DropAfter from no earlier than that, whatever the record says.
	seenWithdrawn map[string]time.Time

	progress atomic.Int64 // unix nanoseconds of the loop's last step, by its clock
	copyBuf  [64 << 10]byte
}

type appliedEntry struct {
	hash [sha256.Size]byte
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
	h := &Harness{cfg: cfg, fs: fs, clock: clk, backend: backend, lease: lease, log: log}
	h.forgetAll()
	h.twice = map[string]bool{}
	h.seenWithdrawn = map[string]time.Time{}
	h.step() // a loop that never gets going is stuck from its start
	return h
}

// forgetAll drops what the loop remembers of the backend and of each consumer: it is read
// again from the backend.
func (h *Harness) forgetAll() {
	h.verifiedAt = time.Time{}
	h.applied = map[string]appliedEntry{}
	h.record, h.recordRead = map[string]ports.Managed{}, false
	h.changes++
	h.lost = map[string]brake{}
	h.waiting = map[string]int{}
	h.failing = map[string]*repeat{}
	h.refused = map[string]*repeat{}
	h.removing = map[string]*repeat{}
	h.passwords, h.secretIdx = map[string]string{}, secretIndex{}
	h.secrets = map[string]secretMemo{}
	h.status = map[string]*Status{}
	h.refusals = map[string]*refusal{}
	h.unasked, h.resume = map[string]int{}, 0
	h.uncheckable, h.shared = map[string]*repeat{}, map[string]*repeat{}
	h.want, h.dirty = nil, true
}

// RetryNow has the next pass try at once every consumer whose create was refused or asked for
// what cannot be made, whatever is left of its wait: what SIGHUP asks for. It may be called
// from any goroutine.
func (h *Harness) RetryNow() { h.retry.Store(true) }

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

// LastProgress is when the loop last got on: a pass started or ended, or a call to the backend
// returned. A loop that makes no progress for long is stuck.
func (h *Harness) LastProgress() time.Time { return time.Unix(0, h.progress.Load()) }

func (h *Harness) step() { h.progress.Store(h.clock.Now().UnixNano()) }
