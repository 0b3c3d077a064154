// The answers of the stored-password check, remembered per role: a verify pass runs no PBKDF2
// for a password it has checked before.

package postgres

import (
	"crypto/sha256"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/novox/postgres-provider/adapters/postgres/scram"
	"github.com/novox/postgres-provider/ports"
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

// verifyAll works out, on every core, whether each stored verifier was made from the minted
// password: a process that has not checked them before (a start, a take-over) runs PBKDF2
// once for each. A provider that is not a superuser cannot read them: it logs in with the
// password instead (checkInside), as the consumers the loop granted a login this pass
// (Provision.Login); the others' passwords are taken as held until their turn (byLogin).
func (c *verifiedCache) verifyAll(ps []ports.Provision, wants []wanted, index []int, seen []observed, byLogin bool) {
	boundedEach(len(index), runtime.GOMAXPROCS(0), func(k int) {
		i := index[k]
		seen[k].verifies = byLogin || seen[k].stored != nil && c.verifies(*seen[k].stored, ps[i].Password, wants[i].role)
	})
}
