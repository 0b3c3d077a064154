// What the adapter says to the operator, through the Logger port, and what it says only once.

package postgres

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/novox/postgres-provider/ports"
)

func (b *Backend) say(level slog.Level, consumer, format string, args ...any) {
	if b.log != nil {
		b.log.Log(ports.Entry{Level: level, Consumer: consumer, Message: fmt.Sprintf(format, args...)})
	}
}

// topic is what a line said once of a consumer is about; with its subject (an extension, a
// grant, a lock), it keys what saidOnce remembers. Every line the adapter says once has its
// topic here, and whether a withdrawal forgets it.
type topic int

const (
	// Said by a create or a check of the consumer, and forgotten with it once it is withdrawn
	// or dropped: listed again, it is said again.
	extensionSkipped  topic = iota // not allowed here, or not available (the text says which); subject: the extension
	extensionInPublic              // installed where the consumer can write; subject: the extension
	extensionRefused               // the server refused to create it; subject: the extension
	extensionPin                   // pinned at a version the server lacks; subject: the extension
	extensionUpdate                // the server refused its update; subject: the extension
	membershipKept                 // a membership the provider may not revoke; subject: the grant
	lockHolderEnded                // what held its lock was ended; subject: whose, and which lock

	// Said by a withdrawal, or of a record, and kept when the consumer is forgotten: every
	// retry of a withdrawal would say them again.
	recordForeign // its role's record is not this provider's (the text says why)
	recordUpgrade // its withdrawn record could not be rewritten in the current format
	signalLacked  // the provider may not end its sessions
)

// kept is whether what was said of t outlives the consumer's withdrawal.
func (t topic) kept() bool { return t >= recordForeign }

// sayKey is one thing said once: of which consumer, about what.
type sayKey struct {
	consumer string
	topic    topic
	subject  string
}

// saidOnce remembers, per consumer, topic and subject, what was last said of it, so that a
// thing is said once until it changes. It is safe for concurrent use.
type saidOnce struct {
	mu   sync.Mutex
	said map[sayKey]string
}

// first reports whether text is not what was last said of k, and remembers it.
func (s *saidOnce) first(k sayKey, text string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.said == nil {
		s.said = map[sayKey]string{}
	}
	if s.said[k] == text {
		return false
	}
	s.said[k] = text
	return true
}

// forget forgets what was said of the consumer, but for what outlives its withdrawal (kept).
func (s *saidOnce) forget(consumer string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.said {
		if k.consumer == consumer && !k.topic.kept() {
			delete(s.said, k)
		}
	}
}

// clear forgets what was said of k: said again should it come back.
func (s *saidOnce) clear(k sayKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.said, k)
}
