// Package scram computes and checks the secrets PostgreSQL stores for a password: a
// SCRAM-SHA-256 verifier (RFC 5802, RFC 7677) of the SASLprep'd password (RFC 4013), made as the
// server makes it, and an md5 hash where that still counts. It knows nothing of a server: the
// caller says the iterations and whether md5 counts.
package scram

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
)

// DefaultIterations is PostgreSQL's default scram_iterations, and MaxIterations the most a
// verifier here is computed or checked with.
const (
	DefaultIterations = 4096
	MaxIterations     = 1 << 24
)

// Verifier is the SCRAM-SHA-256 secret PostgreSQL stores for password, in its format
// "SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>", under a fresh random salt, with
// the given iterations (the server's). The server is given this, never the password.
func Verifier(password string, iterations int) (string, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("salt: %w", err)
	}
	return SaltedVerifier(password, salt, iterations)
}

// SaltedVerifier is Verifier under the salt given rather than a random one: the same secret
// every time, for callers that make many at once (tests).
func SaltedVerifier(password string, salt []byte, iterations int) (string, error) {
	stored, server, err := keys(password, salt, iterations)
	if err != nil {
		return "", err
	}
	enc := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iterations, enc(salt), enc(stored), enc(server)), nil
}

// keys derives StoredKey and ServerKey (RFC 5802) from the SASLprep'd password.
func keys(password string, salt []byte, iterations int) (stored, server []byte, err error) {
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

// Verifies reports whether the secret PostgreSQL stores for role (rolpassword) was made from
// password: a SCRAM-SHA-256 verifier, whatever its iterations, or an md5 hash where md5Counts
// (a server before 18, which deprecates md5). What is neither never verifies.
func Verifies(stored, password, role string, md5Counts bool) bool {
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
	keyParts := strings.SplitN(parts[1], ":", 2)
	if len(iterSalt) != 2 || len(keyParts) != 2 {
		return false
	}
	iterations, err := strconv.Atoi(iterSalt[0])
	if err != nil || iterations < 1 || iterations > MaxIterations {
		return false
	}
	salt, err1 := base64.StdEncoding.DecodeString(iterSalt[1])
	want, err2 := base64.StdEncoding.DecodeString(keyParts[0])
	if err1 != nil || err2 != nil {
		return false
	}
	got, _, err := keys(password, salt, iterations)
	return err == nil && subtle.ConstantTimeCompare(got, want) == 1
}
