package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/novox/postgres-provider/adapters/watch"
	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

// loop is what the daemon runs: the reconcile loop (domain.Harness).
type loop interface {
	// Run passes until ctx ends, one at once when wake delivers, and gives each Report to
	// observe.
	Run(ctx context.Context, wake <-chan struct{}, observe func(domain.Report))
	// RetryNow makes the next pass try again what was refused, whatever is left of its wait.
	RetryNow()
	// LastProgress is when the loop last got on.
	LastProgress() time.Time
	// Progress is where the pass under way stands (any goroutine may ask).
	Progress() domain.Progress
	// Settling is, during the first pass, every listed consumer as far as it has got.
	Settling() []domain.Status
	// WatchedBy tells the loop, before Run, whether its wake-ups cover every file it reads.
	WatchedBy(complete func() bool)
}

// server is what the daemon asks of the backend besides what the loop does with it, to say
// whether it is ready and what /status and /metrics show (ports.Server).
type server interface {
	// Server names the server and the provider's role on it, never a password.
	Server() string
	// Ping answers whether the server can be reached, and where not why.
	Ping(ctx context.Context) error
	// Blocked is why the provider cannot finish what it does, "" where nothing is in its way.
	Blocked() string
	// Kind is how the provider's role stands on the server, a plain word, "" before it was
	// asked.
	Kind() string
}

// leadership is what the daemon asks of the lease (ports.Leadership): the loop asks Held.
type leadership interface {
	// Leader is whether this replica held the lease when last asked.
	Leader() bool
}

var (
	_ loop       = (*domain.Harness)(nil)
	_ server     = ports.Server(nil)
	_ leadership = ports.Leadership(nil)
)

// daemon is the provisioner running until its context ends: the loop, woken by changes to the
// files it reads and by SIGHUP, feeding systemd's watchdog while it gets on, observed through
// its HTTP endpoints (http.go).
type daemon struct {
	cfg     Config
	loop    loop
	server  server
	lease   leadership
	log     ports.Logger
	metrics *Metrics
	notify  *notifier

	// last is the last pass's Report, nil before the first; why is why /readyz says no,
	// empty when ready (ready.go).
	last atomic.Pointer[domain.Report]
	why  atomic.Pointer[string]
	// usage is the last read of the consumers' usage, nil before the first; readNow hands a
	// read the consumers to read (usage.go), only while readUsage waits for one: a pass that
	// ends while a read is under way queues none behind it.
	usage   atomic.Pointer[usage]
	readNow chan []*domain.Status
	// archives are the archives the record keeps, as last read for /status (archivesDue), after
	// archivesMade archives of this process, at archivesRead.
	archives     atomic.Pointer[[]ports.Archive]
	archivesMade int
	archivesRead time.Time
}

// newDaemon is a daemon not yet run, not ready until its first pass.
func newDaemon(cfg Config, l loop, s server, lease leadership, log ports.Logger, notify *notifier) *daemon {
	d := &daemon{cfg: cfg, loop: l, server: s, lease: lease, log: log, metrics: NewMetrics(cfg.Resource), notify: notify,
		readNow: make(chan []*domain.Status)}
	if cfg.MetricsPerConsumer {
		d.metrics.PerConsumer(cfg.Resource)
	}
	d.setWhy("no pass has run yet")
	return d
}

// run runs the daemon until ctx ends; its error is one of configuration (--listen).
func (d *daemon) run(ctx context.Context) error {
	stopHTTP, err := d.serve()
	if err != nil {
		return err
	}
	defer stopHTTP()

	wake := make(chan struct{}, 1)
	poke := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	w, err := watch.New(debounce, func(err error) {
		d.log.Log(ports.Entry{Level: slog.LevelWarn, Message: err.Error()})
	})
	if err != nil {
		d.log.Log(ports.Entry{Level: slog.LevelWarn, Message: fmt.Sprintf("cannot watch files, passes run on the timer only: %v", err)})
	} else {
		defer w.Close()
		w.Watch([]string{d.cfg.Receives}) // before the first pass reads it
		go forward(ctx, w.Wake(), poke)
		d.loop.WatchedBy(w.Complete) // passes on the timer need not stat every secret
	}
	// SIGHUP is the daemon convention for "read your inputs again": a pass at once, which also
	// tries again what was refused, whatever is left of its wait.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				d.log.Log(ports.Entry{Level: slog.LevelInfo, Message: "SIGHUP: a pass now, reading the contributions file and the secrets again"})
				d.loop.RetryNow()
				poke()
			}
		}
	}()
	go d.watchdog(ctx)
	go d.watchPasses(ctx)
	if u, ok := d.server.(ports.UsageReader); ok && d.cfg.UsageEvery > 0 {
		go d.readUsage(ctx, u)
	}

	d.log.Log(ports.Entry{Level: slog.LevelInfo, Message: fmt.Sprintf("starting: %s, reading %s every %s, verifying every %s, on withdraw %s",
		d.server.Server(), d.cfg.Receives, d.cfg.Every, d.cfg.VerifyEvery, d.cfg.OnWithdraw)})
	first := true
	d.loop.Run(ctx, wake, func(r domain.Report) {
		if w != nil {
			w.Watch(r.Watched)
		}
		d.observe(ctx, r)
		if first {
			first = false
			d.notify.send("READY=1")
		}
	})
	d.notify.send("STOPPING=1")
	d.log.Log(ports.Entry{Level: slog.LevelInfo, Message: "stopped"})
	return nil
}

// forward pokes for every value from from until ctx ends.
func forward(ctx context.Context, from <-chan struct{}, poke func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-from:
			poke()
		}
	}
}

// stuckAfter is how long the loop may go without getting on before it counts as stuck: a pass
// interval, the longest a call to the backend may take, and a check's, with room to spare.
func (d *daemon) stuckAfter() time.Duration {
	return d.cfg.Every + ports.DefaultTimeout + d.cfg.HoldsTimeout + 30*time.Second
}

// stuck is how long the loop has not got on, and whether that is longer than it may.
func (d *daemon) stuck(now time.Time) (time.Duration, bool) {
	idle := now.Sub(d.loop.LastProgress())
	return idle, idle > d.stuckAfter()
}

// watchdog feeds systemd's watchdog (WatchdogSec) while the loop gets on, and stops feeding it
// when the loop is stuck, so that systemd restarts the daemon.
func (d *daemon) watchdog(ctx context.Context) {
	every := d.notify.watchdog / 2
	if every <= 0 {
		return
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if _, stuck := d.stuck(now); !stuck {
				d.notify.send("WATCHDOG=1")
			}
		}
	}
}
