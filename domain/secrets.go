package domain

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
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
		// Not even the stat where the watch would have woken the loop for a change (WatchedBy).
		if !h.lookAtSecrets {
			return m.password, nil, nil
		}
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

// loud is whether the n-th pass a secret, or a folder of them, could not be read is said
// loudly: once patience is over, then every loudlyEvery-th.
func loud(n int) bool { return n == patiently+1 || n%loudlyEvery == 0 }

// secretUnreadable counts a pass on which g's secret could not be read and says so: patiently
// at first (the host may write it after the contributions file), then loudly, then rarely.
func (h *Harness) secretUnreadable(c *consumer, g contribution, err error) {
	c.waiting++
	n := c.waiting
	switch {
	case n <= patiently:
		h.say(slog.LevelInfo, g.As, "%s: secret not readable yet (%s): %v", g.As, g.Secret, err)
	case loud(n):
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
	if tally(&c.refusedSecret, text) {
		h.say(slog.LevelError, g.As, "%s", text)
	}
	return text
}

// A folder of secrets that cannot be entered (missing, or not this process's to enter) is one
// reason for every secret in it: said once for all of them, with the spec's patience for a
// secret (the first time, loudly once it is no race any more, then every loudlyEvery-th pass),
// rather than once per consumer. The consumers in it start patient again once it can be
// entered.

// folderCause is a folder of secrets that cannot be entered, met by more than one consumer.
type folderCause struct {
	dir  string
	text string // why it cannot be entered
	// passes counts the passes in a row that met it with this text; logins how many consumers
	// it kept waiting this pass, and said whether that was said this pass.
	passes int
	logins int
	said   bool
}

// blocked is, per folder looked at this pass, the outermost folder of it that cannot be
// entered ("" where it can be entered), and why.
type blocked struct {
	dir string
	err error
}

// blockedFolder is the outermost folder of dir that cannot be entered, and why; "" where dir
// can be entered. Each folder is looked at once a pass (memo).
func (h *Harness) blockedFolder(dir string, memo map[string]blocked) blocked {
	if b, ok := memo[dir]; ok {
		return b
	}
	b := blocked{}
	// Its "." can be looked at only from inside: a folder missing, not a folder, or not
	// this process's to enter, answers an error.
	if _, err := h.fs.Stat(dir + string(filepath.Separator) + "."); err != nil {
		b = blocked{dir: dir, err: err}
		if parent := filepath.Dir(dir); parent != dir {
			if p := h.blockedFolder(parent, memo); p.dir != "" {
				b = p
			}
		}
	}
	memo[dir] = b
	return b
}

// noteFolders finds, for each item whose secret could not be read, whether its folder is the
// reason, and keeps the causes more than one consumer meets this pass; those none meets are
// forgotten.
func (h *Harness) noteFolders(items []*item) {
	var memo map[string]blocked
	met := map[string]*folderCause{}
	for _, it := range items {
		if it.unreadable == nil {
			continue
		}
		if memo == nil {
			memo = map[string]blocked{}
		}
		b := h.blockedFolder(filepath.Dir(it.g.Secret), memo)
		if b.dir == "" {
			continue
		}
		it.folder = b.dir
		f := met[b.dir]
		if f == nil {
			f = &folderCause{dir: b.dir, text: b.err.Error()}
			if was := h.folders[b.dir]; was != nil && was.text == f.text {
				f.passes = was.passes
			}
			met[b.dir] = f
		}
		f.logins++
	}
	for dir, f := range met {
		if f.logins < 2 {
			delete(met, dir) // one consumer's folder: its own line, as the spec says it
			continue
		}
		f.passes++
	}
	h.folders = met
}

// folderUnreadable says, the first time in a pass, that the secrets of f's consumers cannot be
// read because their folder cannot be entered, with a secret's cadence counted in passes.
func (h *Harness) folderUnreadable(f *folderCause) {
	if f.said {
		return
	}
	f.said = true
	switch n := f.passes; {
	case n == 1:
		h.say(slog.LevelInfo, "", "secrets of %d consumers not readable yet: their folder %s cannot be entered: %s",
			f.logins, f.dir, f.text)
	case loud(n):
		h.say(slog.LevelError, "", "CANNOT READ the secrets of %d consumers after %d attempts: their folder %s cannot be "+
			"entered: %s. This is not a race any more — nothing has been provisioned for these consumers and nothing will "+
			"be until somebody looks. Check who owns the folder and who this process runs as (novox/hq issue 225)",
			f.logins, n, f.dir, f.text)
	}
}
