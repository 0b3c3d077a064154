// What the adapter says to the operator, through the Logger port, and what it says only once.

package postgres

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/novox/postgres-provider/ports"
)

func (b *Backend) say(level slog.Level, consumer, format string, args ...any) {
	if b.log != nil {
		b.log.Log(ports.Entry{Level: level, Consumer: consumer, Message: fmt.Sprintf(format, args...)})
	}
}

// saidOnce remembers, per consumer and subject, what was last said of it, so that a thing is
// said once until it changes. It is safe for concurrent use.
type saidOnce struct {
	mu   sync.Mutex
	said map[string]string
}

// first reports whether text is not what was last said of key, and remembers it.
func (s *saidOnce) first(key, text string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.said == nil {
		s.said = map[string]string{}
	}
	if s.said[key] == text {
		return false
	}
	s.said[key] = text
	return true
}

// forget forgets what was said of every key that starts with prefix (a consumer's "role/").
func (s *saidOnce) forget(prefix string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key := range s.said {
		if strings.HasPrefix(key, prefix) {
			delete(s.said, key)
		}
	}
}

// clear forgets what was said of key: said again should it come back.
func (s *saidOnce) clear(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.said, key)
}
