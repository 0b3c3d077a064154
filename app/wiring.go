package app

import (
	"io"
	"time"

	"github.com/novox/postgres-provider/adapters/logger"
	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

// newKind is the backend the provisioner runs, its flags not yet read: the one line that names
// a backend. The rest of app asks it through ports.Kind and ports.Server.
var newKind = func() ports.Kind { return new(postgres.Flags) }

// logOf is where the process's lines go, as cfg says: through the loop's memory of what was
// said once (domain.Told), which the backend and the loop share, so that a fact the backend
// tells of a consumer is said once and forgotten with it.
func logOf(w io.Writer, cfg Config) (ports.Logger, error) {
	log, err := logger.New(w, cfg.LogFormat, cfg.Resource, cfg.LogLevel)
	if err != nil {
		return nil, err
	}
	return domain.NewTold(log), nil
}

// backendOf is the backend cfg names: the daemon's, and (readOnly: it changes nothing) the plan's.
func backendOf(cfg Config, log ports.Logger, readOnly bool) (ports.Server, error) {
	return cfg.Backend.Open(ports.Options{Resource: cfg.Resource, Log: log, MaxConnections: cfg.MaxConns, ReadOnly: readOnly})
}

// loopConfig is the reconcile loop's configuration from cfg: the daemon's, and the plan's.
func loopConfig(cfg Config) domain.Config {
	return domain.Config{
		Resource: cfg.Resource, Receives: cfg.Receives,
		Every: cfg.Every, VerifyEvery: cfg.VerifyEvery, HoldsTimeout: cfg.HoldsTimeout,
		OnWithdraw: cfg.OnWithdraw, DropAfter: cfg.DropAfter, WithdrawSettle: cfg.Settle, Once: cfg.Once,
		Parallel: cfg.Parallel, Updates: cfg.ExtUpdates, Canaries: cfg.Canaries, Soak: soak(cfg.Soak),
		LoginCheckEvery: cfg.LoginCheckEvery, LoginRate: cfg.LoginRate,
		InsideCheckEvery: cfg.InsideCheckEvery, InsideRate: cfg.InsideRate,
	}
}

// soak is --extension-soak as the loop takes it: its zero is "none", the loop's is the default.
func soak(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
