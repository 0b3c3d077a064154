// Package app builds the provisioner from its configuration and runs it: the reconcile loop
// over the backend wiring.go names, once (--once) or as a daemon woken by changes to the files it
// reads and by SIGHUP, observed through /healthz, /readyz, /status and /metrics, and stopped by
// its context; and `provisioner status`, which reads a daemon's /status.
package app

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/novox/postgres-provider/adapters/files"
	"github.com/novox/postgres-provider/domain"
)

// debounce is how long the files must be quiet after a change before a pass starts: the mesh
// writes the contributions file and then the secrets.
const debounce = 100 * time.Millisecond

// Main runs the provisioner with args (without the program name) and environ (KEY=value) and
// answers its exit code: 0 normal end; with --once, 1 when not every listed consumer is held
// or created; 2 for bad usage or configuration (`provisioner status` has its own, in
// statusUsage). It returns when ctx ends.
func Main(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	if len(args) > 0 && args[0] == "status" {
		return statusCommand(ctx, args[1:], env, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "restore" {
		return restoreCommand(ctx, args[1:], env, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "plan" {
		return planCommand(ctx, args[1:], env, stdout, stderr)
	}
	cfg, err := parse(args, env)
	if err != nil {
		fmt.Fprintf(stderr, "provisioner: %s (see --help)\n", redact(err.Error(), cfg.Backend))
		return 2
	}
	switch {
	case cfg.Help:
		writeUsage(stdout)
		return 0
	case cfg.Version:
		b := version()
		fmt.Fprintf(stdout, "provisioner %s (commit %s, %s)\n", b.version, b.commit, b.goversion)
		return 0
	}
	log, err := logOf(stderr, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "provisioner: %v\n", err)
		return 2
	}
	backend, err := backendOf(cfg, log, false)
	if err != nil {
		fmt.Fprintf(stderr, "provisioner: %s\n", redact(err.Error(), cfg.Backend))
		return 2
	}
	defer backend.Close()
	lease := backend.Leadership()
	defer lease.Close()
	h := domain.New(loopConfig(cfg), files.New(), clock.New(), backend, lease, log)

	if cfg.Once {
		if h.Reconcile(ctx).Converged() {
			return 0
		}
		return 1
	}
	if err := newDaemon(cfg, h, backend, lease, log, newNotifier(env)).run(ctx); err != nil {
		fmt.Fprintf(stderr, "provisioner: %v\n", err)
		return 2
	}
	return 0
}
