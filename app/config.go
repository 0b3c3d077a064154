package app

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/novox/postgres-provider/adapters/logger"
	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

// Config is the provisioner's configuration, as parse reads it from the flags and their
// PROVISIONER_* variables (flags.go). Each field names the flag it comes from; parse fills
// every default, and validate says what an operator got wrong.
type Config struct {
	// Receives is the contributions file the mesh writes (--receives); required.
	Receives string
	// Resource is the requirement this provider serves, as the mesh names it (--resource, the
	// kind's default, ports.Described): the record on the server and the lease are kept per
	// resource.
	Resource string
	// Backend is the backend's own flags (how to reach its server, what it may do there),
	// which it registers and checks itself, and which open it (wiring.go). They may carry a
	// password: show what is said of them only through redact.
	Backend ports.Kind
	// Every is the time between passes (--every, domain.DefaultEvery); positive.
	Every time.Duration
	// VerifyEvery is how often each consumer is checked (--verify-every,
	// domain.DefaultVerifyEvery); positive.
	VerifyEvery time.Duration
	// HoldsTimeout is the longest one check may take (--holds-timeout,
	// domain.DefaultHoldsTimeout); positive. It also bounds the readiness ping (at most 5 s).
	HoldsTimeout time.Duration
	// LoginCheckEvery is how often at least each consumer's password is checked by logging in
	// as it, where the backend checks so (ports.LoginChecker; --login-check-every,
	// domain.DefaultLoginCheckEvery); positive.
	LoginCheckEvery time.Duration
	// LoginRate is the most of those logins a second (--login-rate, domain.DefaultLoginRate);
	// at least 1.
	LoginRate int
	// InsideCheckEvery is how often at least what each consumer was given is looked inside
	// (--inside-check-every, domain.DefaultInsideCheckEvery); positive; no longer than
	// VerifyEvery looks inside at every check.
	InsideCheckEvery time.Duration
	// InsideRate is the most of those looks a second (--inside-rate, domain.DefaultInsideRate);
	// at least 1.
	InsideRate int
	// OnWithdraw is what becomes of a consumer the file no longer lists (--on-withdraw):
	// domain.Retain (the default) or domain.Drop.
	OnWithdraw domain.Policy
	// DropAfter is how long a withdrawn consumer keeps its data under domain.Drop
	// (--drop-after, 24h); zero drops at once, never negative.
	DropAfter time.Duration
	// Settle is how long the file must stay unchanged before what it no longer lists is
	// withdrawn (--withdraw-settle, domain.DefaultWithdrawSettle); at least a second.
	Settle time.Duration
	// Parallel is how many consumers are created, checked or withdrawn at once (--parallel,
	// DefaultParallel); at least 1.
	Parallel int
	// MaxConns is the most connections held to the server, the lease's besides
	// (--max-connections); parse makes 0 twice Parallel; at least the fewest the kind works
	// with (ports.Described).
	MaxConns int
	// ExtUpdates is what becomes of an extension older than the version wanted
	// (--extension-updates): domain.Staged (the default) or domain.Off.
	ExtUpdates domain.UpdatePolicy
	// Canaries is how many consumers take an extension version new to the provider first
	// (--extension-canaries, 1); at least 1.
	Canaries int
	// Soak is how long the canaries hold it before the rest follow (--extension-soak,
	// domain.DefaultSoak); zero lets the rest follow at once.
	Soak time.Duration
	// Once runs one pass and exits with whether it converged (--once).
	Once bool
	// Listen is the address /healthz, /readyz, /status and /metrics are served on
	// (--listen); empty serves nothing.
	Listen string
	// ProgressEvery is how often a line says where a long pass stands (--progress-every, 30s).
	ProgressEvery time.Duration
	// UsageEvery is how often each consumer's usage is read (--usage-every, 5m); zero never.
	UsageEvery time.Duration
	// MetricsPerConsumer adds each consumer's usage to /metrics, a series per consumer
	// (--metrics-per-consumer).
	MetricsPerConsumer bool
	// LogFormat is logger.Text (the default) or logger.JSON (--log-format).
	LogFormat string
	// LogLevel is the quietest line said (--log-level, info).
	LogLevel slog.Level
	// Version and Help ask for the version or the help instead of a run (--version,
	// --help); parse validates nothing else then.
	Version bool
	Help    bool
}

// DefaultParallel is --parallel's default: on a 2-core server, creates from nothing stop
// getting faster past it (see the note of issue 12 and `make compare`).
const DefaultParallel = 8

// validate answers what is wrong with c, as one line an operator acts on; nil where nothing is.
func (c Config) validate() error {
	var backend error // the backend's own flags, said where --connection-limit always was
	if c.Backend != nil {
		backend = c.Backend.Check()
	}
	fewest, why := fewestConnections(c.Backend)
	switch {
	case c.Receives == "":
		return fmt.Errorf("--receives is required (or %s): the contributions file to read", envName("receives"))
	case c.Resource == "":
		return fmt.Errorf("--resource is empty")
	case c.Every <= 0:
		return fmt.Errorf("--every %s: want a positive duration", c.Every)
	case c.VerifyEvery <= 0:
		return fmt.Errorf("--verify-every %s: want a positive duration", c.VerifyEvery)
	case c.HoldsTimeout <= 0:
		return fmt.Errorf("--holds-timeout %s: want a positive duration", c.HoldsTimeout)
	case c.LoginCheckEvery <= 0:
		return fmt.Errorf("--login-check-every %s: want a positive duration", c.LoginCheckEvery)
	case c.LoginRate < 1:
		return fmt.Errorf("--login-rate %d: want at least 1 login a second", c.LoginRate)
	case c.InsideCheckEvery <= 0:
		return fmt.Errorf("--inside-check-every %s: want a positive duration", c.InsideCheckEvery)
	case c.InsideRate < 1:
		return fmt.Errorf("--inside-rate %d: want at least 1 look a second", c.InsideRate)
	case backend != nil:
		return backend
	case c.Canaries < 1:
		return fmt.Errorf("--extension-canaries %d: want at least 1", c.Canaries)
	case c.Soak < 0:
		return fmt.Errorf("--extension-soak %s: want zero or a positive duration", c.Soak)
	case c.Parallel < 1:
		return fmt.Errorf("--parallel %d: want at least 1", c.Parallel)
	case c.MaxConns < fewest:
		return fmt.Errorf("--max-connections %d: want at least %d%s", c.MaxConns, fewest, why)
	case c.DropAfter < 0:
		return fmt.Errorf("--drop-after %s: want zero or a positive duration", c.DropAfter)
	case c.Settle < time.Second:
		// A mass withdrawal is held six times the settle: below a second it would be said
		// held and done within one pass, and a writer has no time to finish a rewrite.
		return fmt.Errorf("--withdraw-settle %s: want at least 1s", c.Settle)
	case c.ProgressEvery < time.Second:
		return fmt.Errorf("--progress-every %s: want at least 1s", c.ProgressEvery)
	case c.UsageEvery < 0 || c.UsageEvery > 0 && c.UsageEvery < time.Second:
		return fmt.Errorf("--usage-every %s: want at least 1s, or 0 for never", c.UsageEvery)
	case c.LogFormat != logger.Text && c.LogFormat != logger.JSON:
		return fmt.Errorf("--log-format %q: want text or json", c.LogFormat)
	}
	return nil
}

// fewestConnections is the fewest connections kind works with (ports.Described), and why, as
// the words that follow the number (" (why)"); one, which needs no reason, for a kind that does
// not say.
func fewestConnections(kind ports.Kind) (int, string) {
	if d, ok := kind.(ports.Described); ok {
		n, why := d.FewestConnections()
		return n, " (" + why + ")"
	}
	return 1, ""
}

// product is what --help's first line calls the provider of kind (ports.Described): "the novox
// service mesh's PRODUCT provider"; no more than "provider" for a kind that does not say.
func product(kind ports.Kind) string {
	if d, ok := kind.(ports.Described); ok && d.Product() != "" {
		return d.Product() + " provider"
	}
	return "provider"
}

// loginChecks is what starts the usages of --login-check-every and --login-rate: when kind's
// checks log in as each consumer (ports.Described), none where it does not say.
func loginChecks(kind ports.Kind) string {
	if d, ok := kind.(ports.Described); ok && d.LoginChecks() != "" {
		return d.LoginChecks() + ": "
	}
	return ""
}

// defaultResource is the resource kind serves where --resource does not say (ports.Described);
// none for a kind that does not say.
func defaultResource(kind ports.Kind) string {
	if d, ok := kind.(ports.Described); ok {
		return d.DefaultResource()
	}
	return ""
}
