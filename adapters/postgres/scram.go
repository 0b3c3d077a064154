// SCRAM-SHA-256: the verifier sent for a minted password, and checking a stored one (remembered).

package postgres

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// scramIterations is PostgreSQL's default scram_iterations, and maxIterations the most a
// verifier here is computed or checked with.
const (
	scramIterations = 4096
	maxIterations   = 1 << 24
)

// scramVerifier is the SCRAM-SHA-256 secret PostgreSQL stores for password, in its format
// "SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>", under a fresh random salt, with
// the server's iterations (sessionIterations). The server is given this, never the password.
func scramVerifier(password string, iterations int) (string, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("salt: %w", err)
	}
	stored, server, err := scramKeys(password, salt, iterations)
	if err != nil {
		return "", err
	}
	return scramFormat(iterations, salt, stored, server), nil
}

// scramFormat is PostgreSQL's text of a SCRAM-SHA-256 secret.
func scramFormat(iterations int, salt, stored, server []byte) string {
	enc := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iterations, enc(salt), enc(stored), enc(server))
}

// scramKeys derives StoredKey and ServerKey (RFC 5802) from the SASLprep'd password.
func scramKeys(password string, salt []byte, iterations int) (stored, server []byte, err error) {
	salted, err := pbkdf2.Key(sha256.New, saslprep(password), salt, iterations, sha256.Size)
	if err != nil {
		return nil, nil, fmt.Errorf("derive key: %w", err)
	}
	clientKey := hmacSHA256(salted, "Client Key")
	sum := sha256.Sum256(clientKey)
	return sum[:], hmacSHA256(salted, "Server Key"), nil
}

func hmacSHA256(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// passwordVerifies reports whether the secret PostgreSQL stores for role (rolpassword) was made
// from password: a SCRAM-SHA-256 verifier, whatever its iterations, or an md5 hash where md5
// counts (a server before 18, which deprecates md5).
func passwordVerifies(stored, password, role string, md5Counts bool) bool {
	switch {
	case strings.HasPrefix(stored, "SCRAM-SHA-256$"):
		return scramVerifies(stored, password)
	case md5Counts && strings.HasPrefix(stored, "md5") && len(stored) == 35:
		sum := md5.Sum([]byte(password + role))
		return subtle.ConstantTimeCompare([]byte(stored[3:]), []byte(hex.EncodeToString(sum[:]))) == 1
	default:
		return false
	}
}

func scramVerifies(stored, password string) bool {
	// SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>
	parts := strings.Split(strings.TrimPrefix(stored, "SCRAM-SHA-256$"), "$")
	if len(parts) != 2 {
		return false
	}
	iterSalt := strings.SplitN(parts[0], ":", 2)
	keys := strings.SplitN(parts[1], ":", 2)
	if len(iterSalt) != 2 || len(keys) != 2 {
		return false
	}
	iterations, err := strconv.Atoi(iterSalt[0])
	if err != nil || iterations < 1 || iterations > maxIterations {
		return false
	}
	salt, err1 := base64.StdEncoding.DecodeString(iterSalt[1])
	want, err2 := base64.StdEncoding.DecodeString(keys[0])
	if err1 != nil || err2 != nil {
		return false
	}
	got, _, err := scramKeys(password, salt, iterations)
	return err == nil && subtle.ConstantTimeCompare(got, want) == 1
}

// verifiedCache is passwordVerifies with its answers remembered, one per role, keyed by a
// digest of what was compared, never by the password itself. It holds at most one answer per
// role the provider checks, so it grows with what is managed and no further; a dropped role's
// answer is forgotten.
type verifiedCache struct {
	// md5Counts is whether an md5 hash may verify: the server is older than 18 (serverChecked).
	md5Counts atomic.Bool

	mu      sync.Mutex
	answers map[string]verdict
	// derivations counts the PBKDF2 derivations it ran, for the tests and benchmarks that show
	// a verify pass runs none.
	derivations int
}

type verdict struct {
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
	answer := passwordVerifies(stored, password, role, md5Counts)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.answers == nil {
		c.answers = make(map[string]verdict)
	}
	c.answers[role] = verdict{key: key, answer: answer}
	c.derivations++
	return answer
}

// forget drops the answer for role.
func (c *verifiedCache) forget(role string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.answers, role)
}
