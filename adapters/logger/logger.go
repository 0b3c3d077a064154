// Package logger writes the provider's lines: as the seed's text, "[provisioner:RESOURCE] "
// and the message, one a line (what operators' alerts match on), its control characters escaped,
// or as JSON lines through log/slog with the consumer as a field.
package logger

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/novox/postgres-provider/ports"
)

// Formats are the names New takes.
const (
	Text = "text"
	JSON = "json"
)

// New returns a Logger writing to w in format (Text or JSON) for the given resource; lines
// quieter than level are not written.
func New(w io.Writer, format, resource string, level slog.Level) (ports.Logger, error) {
	switch format {
	case Text, "":
		return &text{w: w, prefix: "[provisioner:" + resource + "] ", level: level}, nil
	case JSON:
		h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})
		return &structured{log: slog.New(h).With("resource", resource)}, nil
	default:
		return nil, fmt.Errorf("log format %q: want %s or %s", format, Text, JSON)
	}
}

type text struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	level  slog.Level
}

var _ ports.Logger = (*text)(nil)

// Log writes the line whole in one write, so that lines from several goroutines never interleave.
// The message is escaped (Escape): a login, path or error text from outside that holds a newline
// or a terminal's escape sequence stays within its line and reaches the terminal as text.
func (t *text) Log(e ports.Entry) {
	if e.Level < t.level || over(e) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	_, _ = io.WriteString(t.w, t.prefix+Escape(e.Message)+"\n")
}

// over is whether e only ends a fact (ports.Once without a line): nothing to write. The loop's
// domain.Told takes these before they reach a Logger; one given them straight says nothing.
func over(e ports.Entry) bool { return e.Once != nil && e.Message == "" }

type structured struct {
	log *slog.Logger
}

var _ ports.Logger = (*structured)(nil)

func (s *structured) Log(e ports.Entry) {
	if over(e) {
		return
	}
	var attrs []slog.Attr
	if e.Consumer != "" {
		attrs = append(attrs, slog.String("consumer", e.Consumer))
	}
	if e.Event != "" {
		attrs = append(attrs, slog.String("event", e.Event))
	}
	s.log.LogAttrs(context.Background(), e.Level, e.Message, attrs...)
}
