package domain

import (
	"errors"
	"fmt"
	"log/slog"
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

// tally counts text once more and reports whether this time is one to say.
func (r *repeat) tally(text string) (say bool) {
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

// audit says a line of the audit trail: what happened to c, once per event, with event naming
// it for those who filter on it (the JSON lines' "event").
func (h *Harness) audit(c *consumer, event, line string) {
	h.log.Log(ports.Entry{Level: slog.LevelInfo, Consumer: c.as, Event: event, Message: line})
}

// debug says a line that only --log-level debug shows: a pass's counts, a backend call.
func (h *Harness) debug(consumer, format string, args ...any) {
	h.log.Log(ports.Entry{Level: slog.LevelDebug, Consumer: consumer, Message: fmt.Sprintf(format, args...)})
}

// later is say for a line of reading the file: said once the pass has said whether the file
// can be used.
func (h *Harness) later(level slog.Level, consumer, format string, args ...any) {
	h.deferred = append(h.deferred, ports.Entry{Level: level, Consumer: consumer, Message: fmt.Sprintf(format, args...)})
}

// scrubbed is an error's text with every password the loop knows removed: an error from the
// backend may quote what it was given, and it may name another consumer's password as well as
// its own. The consumer c's own password goes first, as the spec scrubs it, then the others
// the text holds, longest first and then in byte order, so that a text is scrubbed the same way
// on every pass (and an unchanged failure is not said again for it). It costs the text's length
// times the number of distinct password lengths, not the number of consumers. c may be nil.
func (h *Harness) scrubbed(c *consumer, err error) string {
	own := ""
	if c != nil {
		own = c.password
	}
	text := Scrub(err.Error(), own)
	for _, form := range h.consumers.secrets.in(text) {
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

// sharedCause is a reason several consumers could not be checked in one pass: said once for
// all of them, as a problem of the backend.
type sharedCause struct {
	text    string
	logins  []string
	said    bool
	refused bool // a refusal their entries meet (isRefusal), not the backend's trouble
}

// refusedCause is the key of a refusal several consumers' checks meet, apart from the causes of
// checks that could not be made.
func refusedCause(err error) string { return refusalKey(causeOf(err)) }

// refusalKey is a refusal's cause (its text) as the loop keys it, apart from the same text as a
// check that could not be made.
func refusalKey(cause string) string { return "refused\x00" + cause }

// sharedCauses are the reasons more than one consumer could not be checked this pass, by their
// cause (causeOf); a cause already said for several that fewer meet this pass is still theirs,
// said once while it lasts. What was said of a cause is forgotten only by a pass that checked
// consumers and met it for none: a pass between verify rounds checks nothing, and says nothing
// of whether the cause is over. Said again should it come back.
func (h *Harness) sharedCauses(items []*item) map[string]*sharedCause {
	var byCause map[string]*sharedCause
	checked := false
	for _, it := range items {
		if !it.asked || !it.usable() {
			continue
		}
		checked = true
		if it.answer().Err == nil {
			continue
		}
		if byCause == nil {
			byCause = map[string]*sharedCause{}
		}
		key, refused := causeOf(it.answer().Err), ports.IsRefusal(it.answer().Err)
		if refused {
			key = refusedCause(it.answer().Err)
		}
		s := byCause[key]
		if s == nil {
			s = &sharedCause{text: h.scrubbed(nil, errors.New(causeOf(it.answer().Err))), refused: refused}
			byCause[key] = s
		}
		s.logins = append(s.logins, it.c.as)
	}
	met := make(map[string]bool, len(byCause))
	for c, s := range byCause {
		if len(s.logins) < 2 && h.shared[s.key()] == nil {
			delete(byCause, c)
			continue
		}
		met[s.key()] = true
	}
	if checked {
		for text := range h.shared {
			if !met[text] {
				delete(h.shared, text)
				delete(h.sharedTold, text)
			}
		}
	}
	return byCause
}

// sayShared says, the first time in a pass, that the consumers of s could not be checked:
// when the cause is new, and while it lasts, every loudlyEvery-th pass; and at once when a
// consumer its line has not counted yet meets it, naming those first.
func (h *Harness) sayShared(s *sharedCause) {
	if s.said {
		return
	}
	s.said = true
	rep := h.shared[s.key()]
	if rep == nil {
		rep = &repeat{}
		h.shared[s.key()] = rep
	}
	told := h.sharedTold[s.key()]
	if told == nil {
		told = map[string]bool{}
		h.sharedTold[s.key()] = told
	}
	var fresh, known []string
	for _, as := range s.logins {
		if told[as] {
			known = append(known, as)
		} else {
			fresh = append(fresh, as)
		}
		told[as] = true
	}
	if !rep.tally(s.text) && (len(fresh) == 0 || len(known) == 0 && len(fresh) == len(told)) {
		return
	}
	logins := append(fresh, known...)
	who := strings.Join(logins[:min(3, len(logins))], ", ")
	if len(logins) > 3 {
		who += ", ..."
	}
	if s.refused {
		h.say(slog.LevelWarn, "", "%d consumers (%s) refused: %s; what was made for them is left as it is", len(s.logins), who, s.text)
		return
	}
	h.say(slog.LevelWarn, "", "could not check the backend for %d consumers (%s)%s: %s", len(s.logins), who,
		h.retrying(", will ask again"), s.text)
}

// key is what the loop remembers of s by: its text, a refusal's apart.
func (s *sharedCause) key() string {
	if s.refused {
		return refusalKey(s.text)
	}
	return s.text
}

// causeOf is what consumers whose checks failed alike share: the cause a backend says of its
// error (ports.SharedError's Cause), or else the text of the error it wraps innermost, which a
// wrapper that names the consumer ("check letta: %w") leaves out.
func causeOf(err error) string {
	var shared *ports.SharedError
	if errors.As(err, &shared) {
		return shared.Cause
	}
	return innermost(err).Error()
}

// innermost is the error at the end of err's chain of wrapped errors; of one that wraps several
// (an error and the kind it is of), the first.
func innermost(err error) error {
	for {
		var next error
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			next = u.Unwrap()
		case interface{ Unwrap() []error }:
			if w := u.Unwrap(); len(w) > 0 {
				next = w[0]
			}
		}
		if next == nil {
			return err
		}
		err = next
	}
}
