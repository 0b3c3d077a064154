package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/novox/postgres-provider/ports"
)

// handler serves the daemon's endpoints: /healthz (the loop gets on), /readyz (ready.go),
// /status (status.go) and /metrics.
func (d *daemon) handler() http.Handler {
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
		if why := d.notReady(); why != "" {
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
	return mux
}

// serve starts serving the endpoints when --listen names an address; it answers how to stop.
func (d *daemon) serve() (stop func(), err error) {
	if d.cfg.Listen == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", d.cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", d.cfg.Listen, err)
	}
	srv := &http.Server{Handler: d.handler(), ReadHeaderTimeout: 5 * time.Second}
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
