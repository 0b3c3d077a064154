package domain

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/novox/postgres-provider/ports"
)

// How many passes a secret may be unreadable before it stops being called a race, and once said
// loudly, how often it is repeated. The same cadence quiets a create, a remove or a server
// problem that keeps failing the same way.
const (
	patiently   = 12
	loudlyEvery = 240
)

// repeat is a text that keeps coming back: a failure said the first time and then, while it
// stays the same, every loudlyEvery-th time. A different text starts the count again.
type repeat struct {
	text  string
	times int
}

// again counts text once more and reports whether this time is one to say.
func (r *repeat) again(text string) bool {
	if r.text != text {
		*r = repeat{text: text}
	}
	r.times++
	return r.times == 1 || r.times%loudlyEvery == 0
}

// say logs one line. The line is said as it is: only the texts that come from outside (errors)
// are scrubbed, by scrubbed, before they are put in it.
func (h *Harness) say(level slog.Level, consumer, format string, args ...any) {
	h.log.Log(ports.Entry{Level: level, Consumer: consumer, Message: fmt.Sprintf(format, args...)})
}

// later is say for a line of reading the file: said once the pass has said whether the file
// can be used.
func (h *Harness) later(level slog.Level, consumer, format string, args ...any) {
	h.deferred = append(h.deferred, ports.Entry{Level: level, Consumer: consumer, Message: fmt.Sprintf(format, args...)})
}

// scrubbed is an error's text with every password the loop knows removed: an error from the
// backend may quote what it was given, and it may name another consumer's password as well as
// its own. The consumer as's own password goes first, as the spec scrubs it, then the others
// the text holds, longest first and then in byte order, so that a text is scrubbed the same way
// on every pass (and an unchanged failure is not said again for it). It costs the text's length
// times the number of distinct password lengths, not the number of consumers. as may be empty.
func (h *Harness) scrubbed(as string, err error) string {
	text := scrub(err.Error(), h.passwords[as])
	for _, form := range h.secretIdx.in(text) {
		text = strings.ReplaceAll(text, form, "***")
	}
	return text
}

// scrub is text with password removed, raw, query-escaped and path-escaped.
func scrub(text, password string) string {
	if password == "" {
		return text
	}
	for _, form := range []string{password, url.QueryEscape(password), url.PathEscape(password)} {
		text = strings.ReplaceAll(text, form, "***")
	}
	return text
}

// retrying is the end of a failure's line in a daemon, which tries again; a single pass
// (Config.Once) does not.
func (h *Harness) retrying(daemon string) string {
	if h.cfg.Once {
		return ""
	}
	return daemon
}
