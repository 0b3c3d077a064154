package app

import (
	"time"

	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

// backendOf is the PostgreSQL backend cfg names: the daemon's, and (readOnly: its every session
// refuses writes) the plan's.
func backendOf(cfg Config, log ports.Logger, readOnly bool) (*postgres.Backend, error) {
	return postgres.New(postgres.Config{URL: cfg.DatabaseURL, Database: cfg.ProviderDB, Resource: cfg.Resource, Adopt: cfg.Adopt, Log: log,
		MaxConnections: cfg.MaxConns, AllowExtensions: cfg.AllowExts, AllowSettings: cfg.AllowSettings,
		ConnectionLimit: cfg.ConnLimit, ReadOnly: readOnly})
}

// loopConfig is the reconcile loop's configuration from cfg: the daemon's, and the plan's.
func loopConfig(cfg Config) domain.Config {
	return domain.Config{
		Resource: cfg.Resource, Receives: cfg.Receives,
		Every: cfg.Every, VerifyEvery: cfg.VerifyEvery, HoldsTimeout: cfg.HoldsTimeout,
		OnWithdraw: cfg.OnWithdraw, DropAfter: cfg.DropAfter, WithdrawSettle: cfg.Settle, Once: cfg.Once,
		Parallel: cfg.Parallel, Updates: cfg.ExtUpdates, Canaries: cfg.Canaries, Soak: soak(cfg.Soak),
		LoginCheckEvery: cfg.LoginCheckEvery, LoginRate: cfg.LoginRate,
	}
}

// soak is --extension-soak as the loop takes it: its zero is "none", the loop's is the default.
func soak(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
