// Package app builds the provisioner daemon from its configuration and runs it: the reconcile
// loop over the PostgreSQL backend, woken by changes to the files it reads, observed through
// /healthz, /readyz and /metrics, and stopped by its context.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/novox/postgres-provider/adapters/files"
	"github.com/novox/postgres-provider/adapters/logger"
	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/adapters/watch"
	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

// Version is the build's version, set by the linker (make build).
var Version = "dev"

// debounce is how long the files must be quiet after a change before a pass starts: the mesh
// writes the contributions file and then the secrets.
const debounce = 100 * time.Millisecond

// Main runs the provisioner with args (without the program name) and environ (KEY=value) and
// answers its exit code: 0 normal end; with --once, 1 when not every listed consumer is held
// or created; 2 for bad usage or configuration. It returns when ctx ends.
func Main(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	cfg, err := parse(args, env)
	if err != nil {
		fmt.Fprintf(stderr, "provisioner: %s (see --help)\n", redact(err.Error(), cfg.DatabaseURL))
		return 2
	}
	switch {
	case cfg.Help:
		writeUsage(stdout)
		return 0
	case cfg.Version:
		fmt.Fprintln(stdout, "provisioner", Version)
		return 0
	}
	log, err := logger.New(stderr, cfg.LogFormat, cfg.Resource)
	if err != nil {
		fmt.Fprintf(stderr, "provisioner: %v\n", err)
		return 2
	}
	backend, err := postgres.New(postgres.Config{URL: cfg.DatabaseURL, Resource: cfg.Resource, Adopt: cfg.Adopt, Log: log})
	if err != nil {
		fmt.Fprintf(stderr, "provisioner: %s\n", redact(err.Error(), cfg.DatabaseURL))
		return 2
	}
	defer backend.Close()
	h := domain.New(domain.Config{
		Resource: cfg.Resource, Receives: cfg.Receives,
		Every: cfg.Every, VerifyEvery: cfg.VerifyEvery, HoldsTimeout: cfg.HoldsTimeout,
		OnWithdraw: cfg.OnWithdraw, DropAfter: cfg.DropAfter, WithdrawSettle: cfg.Settle, Once: cfg.Once,
	}, files.New(), clock.New(), backend, nil, log)

	if cfg.Once {
		if h.Reconcile(ctx).Converged() {
			return 0
		}
		return 1
	}
	d := &daemon{cfg: cfg, h: h, backend: backend, log: log, metrics: NewMetrics(cfg.Resource)}
	if err := d.run(ctx); err != nil {
		fmt.Fprintf(stderr, "provisioner: %v\n", err)
		return 2
	}
	return 0
}

// daemon is the provisioner running until its context ends.
type daemon struct {
	cfg     Config
	h       *domain.Harness
	backend *postgres.Backend
	log     ports.Logger
	metrics *Metrics

	ready    atomic.Bool
	notReady atomic.Value // string: why /readyz says no
	checked  bool         // whether the provider's role was checked for superuser, once reached
}

func (d *daemon) run(ctx context.Context) error {
	d.notReady.Store("no pass has run yet")
	stopHTTP, err := d.serve()
	if err != nil {
		return err
	}
	defer stopHTTP()

	var wake <-chan struct{}
	w, err := watch.New(debounce, func(err error) {
		d.log.Log(ports.Entry{Level: slog.LevelWarn, Message: err.Error()})
	})
	if err != nil {
		d.log.Log(ports.Entry{Level: slog.LevelWarn, Message: fmt.Sprintf("cannot watch files, passes run on the timer only: %v", err)})
	} else {
		defer w.Close()
		w.Watch([]string{d.cfg.Receives}) // before the first pass reads it
		wake = w.Wake()
	}
	d.log.Log(ports.Entry{Level: slog.LevelInfo, Message: fmt.Sprintf("starting: reading %s every %s, verifying every %s, on withdraw %s",
		d.cfg.Receives, d.cfg.Every, d.cfg.VerifyEvery, d.cfg.OnWithdraw)})
	d.h.Run(ctx, wake, func(r domain.Report) {
		if w != nil {
			w.Watch(r.Watched)
		}
		d.observe(ctx, r)
	})
	d.log.Log(ports.Entry{Level: slog.LevelInfo, Message: "stopped"})
	return nil
}

// observe records a pass: metrics, and readiness, which needs the file read and the server
// answering.
func (d *daemon) observe(ctx context.Context, r domain.Report) {
	if ctx.Err() != nil {
		d.metrics.Observe(r, d.ready.Load())
		return // stopping: not worth a round trip
	}
	pctx, cancel := context.WithTimeout(ctx, min(d.cfg.HoldsTimeout, 5*time.Second))
	err := d.backend.Ping(pctx)
	cancel()
	d.metrics.Observe(r, err == nil)
	if err == nil && !d.checked {
		d.checkSuperuser(ctx)
	}
	switch {
	case !r.FileRead:
		d.notReady.Store("the contributions file could not be read or used")
	case err != nil:
		d.notReady.Store("the server cannot be reached")
	}
	d.ready.Store(r.FileRead && err == nil)
}

// checkSuperuser says, once, when the provider's role is not a superuser: every create of a
// consumer with an untrusted extension, and every check, would fail without one.
func (d *daemon) checkSuperuser(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	super, err := d.backend.Superuser(cctx)
	if err != nil {
		return // asked again after the next pass
	}
	d.checked = true
	if !super {
		d.log.Log(ports.Entry{Level: slog.LevelError, Message: "the provider's role is not a superuser: it cannot create " +
			"untrusted extensions (vector, dblink) nor check stored passwords; connect as a superuser (--database-url)"})
	}
}

// serve starts the HTTP endpoints when --listen names an address; it answers how to stop them.
func (d *daemon) serve() (func(), error) {
	if d.cfg.Listen == "" {
		return func() {}, nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !d.ready.Load() {
			http.Error(w, "not ready: "+d.notReady.Load().(string), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
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
