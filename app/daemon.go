package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/adapters/watch"
	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

// daemon is the provisioner running until its context ends.
type daemon struct {
	cfg     Config
	h       *domain.Harness
	backend *postgres.Backend
	lease   *postgres.Lease
	log     ports.Logger
	metrics *Metrics
	notify  *notifier

	// last is the last pass's Report; why is why /readyz says no, empty when ready.
	last atomic.Pointer[domain.Report]
	why  atomic.Pointer[string]
}

func (d *daemon) run(ctx context.Context) error {
	d.setWhy("no pass has run yet")
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
				d.h.RetryNow()
				poke()
			}
		}
	}()
	go d.watchdog(ctx)

	d.log.Log(ports.Entry{Level: slog.LevelInfo, Message: fmt.Sprintf("starting: %s, reading %s every %s, verifying every %s, on withdraw %s",
		d.backend.Server(), d.cfg.Receives, d.cfg.Every, d.cfg.VerifyEvery, d.cfg.OnWithdraw)})
	first := true
	d.h.Run(ctx, wake, func(r domain.Report) {
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

func (d *daemon) setWhy(why string) { d.why.Store(&why) }

// observe records a pass: metrics, what /status shows, and readiness, which needs the file read
// and the server usable: as the pass found it, or where the pass did not ask it, as a ping
// after it finds it.
func (d *daemon) observe(ctx context.Context, r domain.Report) {
	d.last.Store(&r)
	reached := r.ServerProblem == ""
	var pingErr error
	if ctx.Err() == nil && r.ServerProblem == "" {
		pctx, cancel := context.WithTimeout(ctx, min(d.cfg.HoldsTimeout, 5*time.Second))
		pingErr = d.backend.Ping(pctx)
		cancel()
		reached = pingErr == nil
	}
	// Readiness first: whoever counts passes on /metrics then finds it as this pass left it.
	switch {
	case r.ServerProblem != "":
		d.setWhy(r.ServerProblem)
	case !r.FileRead && !r.Standby:
		d.setWhy("the contributions file could not be read or used")
	case pingErr != nil:
		d.setWhy(pingErr.Error())
	case d.backend.Blocked() != "": // as the ping found it
		d.setWhy(d.backend.Blocked() + "; an operator must end it")
	default:
		d.setWhy("")
	}
	d.metrics.leader.Set(boolean(d.lease.Leader()))
	d.metrics.Mode(string(d.backend.Mode()))
	d.metrics.Observe(r, reached)
}

// stuckAfter is how long the loop may go without getting on before it counts as stuck: a pass
// interval, the longest a call to the backend may take, and a check's, with room to spare.
func (d *daemon) stuckAfter() time.Duration {
	return d.cfg.Every + postgres.DefaultTimeout + d.cfg.HoldsTimeout + 30*time.Second
}

// stuck is how long the loop has not got on, and whether that is longer than it may.
func (d *daemon) stuck(now time.Time) (time.Duration, bool) {
	idle := now.Sub(d.h.LastProgress())
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

// statusDoc is what GET /status answers.
type statusDoc struct {
	Resource      string          `json:"resource"`
	Version       string          `json:"version"`
	Role          string          `json:"role"`
	Mode          string          `json:"mode,omitempty"`
	Ready         bool            `json:"ready"`
	NotReady      string          `json:"not_ready,omitempty"`
	LastPass      *passDoc        `json:"last_pass,omitempty"`
	ServerProblem string          `json:"server_problem,omitempty"`
	Consumers     []domain.Status `json:"consumers"`
}

// passDoc is the last pass in /status. Durations are numbers of seconds, as Prometheus has
// them, not Go's duration strings.
type passDoc struct {
	TookSeconds     float64 `json:"took_seconds"`
	FileRead        bool    `json:"file_read"`
	BadEntries      int     `json:"bad_entries,omitempty"`
	WithdrawalsHeld int     `json:"withdrawals_held,omitempty"`
	MassWithdrawal  bool    `json:"mass_withdrawal,omitempty"`
}

func (d *daemon) status() statusDoc {
	why := *d.why.Load()
	doc := statusDoc{Resource: d.cfg.Resource, Version: version().version, Role: "acting", Mode: string(d.backend.Mode()),
		Ready: why == "", NotReady: why, Consumers: []domain.Status{}}
	if r := d.last.Load(); r != nil {
		doc.LastPass = &passDoc{TookSeconds: r.Took.Seconds(), FileRead: r.FileRead, BadEntries: r.BadEntries,
			WithdrawalsHeld: r.WithdrawalsHeld, MassWithdrawal: r.MassWithdrawal}
		doc.ServerProblem = r.ServerProblem
		if r.Standby {
			doc.Role = "standby"
		}
		if r.Status != nil {
			doc.Consumers = r.Status
		}
	}
	return doc
}

// serve starts the HTTP endpoints when --listen names an address; it answers how to stop them.
func (d *daemon) serve() (func(), error) {
	if d.cfg.Listen == "" {
		return func() {}, nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if idle, stuck := d.stuck(time.Now()); stuck {
			http.Error(w, fmt.Sprintf("stuck: the loop has not got on for %s (more than %s)", idle.Round(time.Second), d.stuckAfter()),
				http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if why := *d.why.Load(); why != "" {
			http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(d.status())
	})
	mux.Handle("GET /metrics", d.metrics.Handler())
	ln, err := net.Listen("tcp", d.cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", d.cfg.Listen, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Log(ports.Entry{Level: slog.LevelError, Message: fmt.Sprintf("http: %v", err)})
		}
	}()
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
}
