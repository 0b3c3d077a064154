// Package ports declares what the reconcile loop needs from the world: a filesystem to read the
// contributions file and secrets from, a clock, a backend that provisions consumers, and a logger.
// It holds interfaces and the plain data that crosses them, nothing else.
//
// "Port" here means a driven port: an interface the domain calls and an adapter implements.
package ports

import (
	"context"
	"log/slog"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/spf13/afero"
)

// Provision is one consumer's resource to bring into being: everything the mesh derived and
// delivered for it.
type Provision struct {
	// As is the login the mesh derived and gave the consumer to present.
	As string
	// Password is the one the mesh minted, read from the consumer's secret file.
	Password string
	// Values are what the consumer contributed, e.g. {"name": "letta", "extensions": ["vector"]}.
	Values map[string]any
	// Derived is what this provider's own definition derived for the consumer, e.g.
	// {"database": "letta"}.
	Derived map[string]any
	// At is where the consumer is.
	At string
	// Consumer is the consumer's node.
	Consumer string
}

// Backend is the resource a provider brings into being for each consumer.
type Backend interface {
	// Create brings p into being, or back to exactly what p says. It is idempotent: repeating it,
	// or racing it with itself for the same consumer, leaves one correct resource.
	Create(ctx context.Context, p Provision) error
	// Remove withdraws what Create made for the login as; derived is what the mesh last derived
	// for it. Removing what is already gone is not an error.
	Remove(ctx context.Context, as string, derived map[string]any) error
	// Holds reports whether the backend still holds the consumer exactly as p says. It changes
	// nothing. An error means the backend could not be asked, not that the consumer is lost.
	Holds(ctx context.Context, p Provision) (bool, error)
}

// Filesystem is the part of afero.Fs the loop reads the contributions file and secrets through.
type Filesystem interface {
	Open(name string) (afero.File, error)
}

// Clock is the part of github.com/benbjohnson/clock the loop takes its time from.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
	AfterFunc(d time.Duration, f func()) *clock.Timer
	WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc)
}

// Entry is one line the provider says to its operator.
type Entry struct {
	// Level is how loud the line is: Info for progress, Warn for what a person may have to look at.
	Level slog.Level
	// Consumer is the login the line is about; empty for lines about the whole provider.
	Consumer string
	// Message is the line itself, without the "[provisioner:RESOURCE] " prefix, which the
	// Logger adds. Operators' alerts match on it word for word.
	Message string
}

// Logger is where the provider's lines go. Log must be safe for concurrent use.
type Logger interface {
	Log(e Entry)
}
