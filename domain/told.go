package domain

import (
	"sync"

	"github.com/novox/postgres-provider/ports"
)

// Told is the Logger a backend and the loop say their lines through: a line that is a fact of
// a consumer (ports.Entry.Once) is said once, while the fact holds, and what was said of a
// consumer is forgotten once it is withdrawn or dropped, but for what outlives it (what a
// withdrawal says, which each retry of it would say again). Every other line goes straight
// through. A backend tells what it found; whether that is said again is the loop's. It is safe
// for concurrent use: a backend's calls run side by side.
type Told struct {
	log  ports.Logger
	mu   sync.Mutex
	said map[toldKey]ports.Once
}

// toldKey is one fact said once: of which consumer, about what.
type toldKey struct{ consumer, about, subject string }

// NewTold is a Told saying its lines to log (none where log is nil).
func NewTold(log ports.Logger) *Told { return &Told{log: log} }

// Log says e, where e is no fact already said as it stands.
func (t *Told) Log(e ports.Entry) {
	if e.Once != nil && !t.first(e) {
		return
	}
	if t.log != nil {
		e.Once = nil
		t.log.Log(e)
	}
}

// first reports whether e is a fact to say (new, or changed since it was said), and remembers
// it; an e without a Message ends its fact, and is nothing to say.
func (t *Told) first(e ports.Entry) bool {
	k := toldKey{e.Consumer, e.Once.About, e.Once.Subject}
	t.mu.Lock()
	defer t.mu.Unlock()
	if e.Message == "" {
		delete(t.said, k)
		return false
	}
	if was, ok := t.said[k]; ok && was.Fact == e.Once.Fact {
		return false
	}
	if t.said == nil {
		t.said = map[toldKey]ports.Once{}
	}
	t.said[k] = *e.Once
	return true
}

// forget forgets what was said of the consumer as, but what outlives its withdrawal: listed
// again, it is said again.
func (t *Told) forget(as string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, was := range t.said {
		if k.consumer == as && !was.Outlives {
			delete(t.said, k)
		}
	}
}
