// The answers of the stored-password check, remembered per role: a verify pass runs no PBKDF2
// for a password it has checked before.

package postgres

import (
	"crypto/sha256"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/novox/postgres-provider/adapters/postgres/scram"
)

// verifiedCache is scram.Verifies with its answers remembered, one per role, keyed by a
// digest of what was compared, never by the password itself. It holds at most one answer per
// role the provider checks, so it grows with what is managed and no further; a dropped role's
// answer is forgotten.
type verifiedCache struct {
	// md5Counts is whether an md5 hash may verify: the server is older than 18 (serverChecked).
	md5Counts atomic.Bool

	mu      sync.Mutex
	answers map[string]verifiedAnswer
	// derivations counts the PBKDF2 derivations it ran, for the tests and benchmarks that show
	// a verify pass runs none.
	derivations int
}

// verifiedAnswer is one answer the cache holds, under the key of what it was asked.
type verifiedAnswer struct {
	key    [sha256.Size]byte
	answer bool
}

func (c *verifiedCache) verifies(stored, password, role string) bool {
	md5Counts := c.md5Counts.Load()
	h := sha256.New()
	for _, part := range []string{stored, password, role, strconv.FormatBool(md5Counts)} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	c.mu.Lock()
	v, known := c.answers[role]
	c.mu.Unlock()
	if known && v.key == key {
		return v.answer
	}
	answer := scram.Verifies(stored, password, role, md5Counts)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.answers == nil {
		c.answers = make(map[string]verifiedAnswer)
	}
	c.answers[role] = verifiedAnswer{key: key, answer: answer}
	c.derivations++
	return answer
}

// forget drops the answer for role.
func (c *verifiedCache) forget(role string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.answers, role)
}
