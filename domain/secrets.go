package domain

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// maxSecret is the most a secret may hold. The mesh mints passwords of a few dozen bytes; a
// file of over a kilobyte is something else put in its place (a key, a certificate), and no
// client sends such a password.
var maxSecret int64 = 1 << 10

// readSecret answers the consumer's password. unreadable is why the secret could not be read
// (it may not be written yet: the loop waits); refused is why what it holds cannot be a
// password (the loop says so and provisions nothing).
func (h *Harness) readSecret(c *consumer, path string) (password string, unreadable, refused error) {
	if m := c.memo; m.path == path && m.id.ctime != 0 {
		// Known, and unchanged since it was read: one stat, not a read. The change time
		// moves with every write, so a secret rewritten to the same size and time is seen.
		if fi, err := h.fs.Stat(path); err == nil && h.idOf(path, fi) == m.id {
			return m.password, nil, nil
		}
	}
	c.memo = secretMemo{}
	raw, id, err := h.readStable(path, maxSecret+1) // and its newline
	var large errTooLarge
	switch {
	case errors.As(err, &large):
		return "", nil, fmt.Errorf("it holds more than %d bytes, which is not a password", maxSecret)
	case err != nil:
		return "", err, nil
	}
	pw := strings.TrimSuffix(string(raw), "\n") // one trailing newline is not part of it
	switch {
	case int64(len(pw)) > maxSecret:
		return "", nil, fmt.Errorf("it holds more than %d bytes, which is not a password", maxSecret)
	case bytes.IndexByte(raw, 0) >= 0:
		return "", nil, errors.New("it holds a NUL byte, which no client can send in a password")
	case pw == "":
		// Made and not written yet, most likely: waited for like a secret not there yet.
		return "", errors.New("it is empty"), nil
	}
	c.memo = secretMemo{path: path, id: id, password: pw}
	return pw, nil, nil
}

// secretMemo is a secret as it was when last read.
type secretMemo struct {
	path     string
	id       fileID
	password string
	// hash is the consumer's hash under this password and shape.
	shape, hash [32]byte
	hashed      bool
}

// secretUnreadable counts a pass on which g's secret could not be read and says so: patiently
// at first (the host may write it after the contributions file), then loudly, then rarely.
func (h *Harness) secretUnreadable(c *consumer, g contribution, err error) {
	c.waiting++
	n := c.waiting
	switch {
	case n <= patiently:
		h.say(slog.LevelInfo, g.As, "%s: secret not readable yet (%s): %v", g.As, g.Secret, err)
	case n == patiently+1 || n%loudlyEvery == 0:
		h.say(slog.LevelError, g.As, "%s: CANNOT READ the secret after %d attempts (%s): %v. This is not a race any more — "+
			"nothing has been provisioned for this consumer and nothing will be until somebody looks. "+
			"Check who owns the file and who this process runs as (novox/hq issue 225)", g.As, n, g.Secret, err)
	}
}

// secretRefused says, the first time and then rarely, that g's secret holds what cannot be a
// password.
func (h *Harness) secretRefused(c *consumer, g contribution, err error) string {
	text := fmt.Sprintf("%s: secret refused (%s): %v; nothing is provisioned for this consumer until it holds a password",
		g.As, g.Secret, err)
	if again(&c.refusedSecret, text) {
		h.say(slog.LevelError, g.As, "%s", text)
	}
	return text
}
