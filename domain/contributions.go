package domain

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// contribution is one entry of the contributions file's given list.
type contribution struct {
	As      string         `json:"as"`
	Secret  string         `json:"secret"`
	Node    string         `json:"node"`
	At      string         `json:"at"`
	Values  map[string]any `json:"values"`
	Derived map[string]any `json:"derived"`
}

// readContributions answers the consumers asked for, or nil when the file says nothing usable.
// Nothing read is not nobody asking: only a file that was read can withdraw.
func (h *Harness) readContributions() []contribution {
	raw, err := h.readFile(h.cfg.Receives)
	if err != nil {
		h.warn(fmt.Sprintf("contributions file unreadable (%s): %v", h.cfg.Receives, err))
		return nil
	}
	var doc struct {
		Requirement string          `json:"requirement"`
		Given       json.RawMessage `json:"given"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		h.warn(fmt.Sprintf("contributions file is not JSON (%s): %v", h.cfg.Receives, err))
		return nil
	}
	if doc.Requirement != "" && doc.Requirement != h.cfg.Resource {
		h.warn(fmt.Sprintf("%s is for %s, not %s", h.cfg.Receives, doc.Requirement, h.cfg.Resource))
		return nil
	}
	var given []contribution
	if len(doc.Given) == 0 || string(doc.Given) == "null" || json.Unmarshal(doc.Given, &given) != nil {
		h.warn(fmt.Sprintf("%s has no given list", h.cfg.Receives))
		return nil
	}
	h.warn("")
	return h.grants(given)
}

// grants keeps the entries that grant a credential: those with both `as` and `secret`. Where a
// login is listed twice, the first entry wins; applying both would flip the consumer between
// two passwords on every pass.
func (h *Harness) grants(given []contribution) []contribution {
	out := make([]contribution, 0, len(given))
	seen := make(map[string]bool, len(given))
	twice := map[string]bool{}
	for _, g := range given {
		if g.As == "" || g.Secret == "" {
			continue
		}
		if seen[g.As] {
			twice[g.As] = true
			if !h.twice[g.As] {
				h.say(slog.LevelWarn, g.As, "%s: listed more than once in %s; using the first entry", g.As, h.cfg.Receives)
			}
			continue
		}
		seen[g.As] = true
		out = append(out, g)
	}
	h.twice = twice
	return out
}

// warn says why the file said nothing, once until the reason changes, and once when it is
// readable again.
func (h *Harness) warn(why string) {
	if why == h.lastWarning {
		return
	}
	if why != "" {
		h.say(slog.LevelWarn, "", "%s; nothing applied or removed until it can be read", why)
	} else {
		h.say(slog.LevelInfo, "", "contributions file readable again")
	}
	h.lastWarning = why
}

// maxFile is the most the loop reads of one file: a contributions file or secret larger than
// this is a mistake (a wrong path, a log file), and reading it whole would cost the process
// its memory.
var maxFile int64 = 64 << 20

// readFile reads a whole file through the Filesystem port.
func (h *Harness) readFile(name string) ([]byte, error) {
	f, err := h.fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, err
	}
	if int64(len(raw)) > maxFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, maxFile)
	}
	return raw, nil
}

// password is a secret file's content less one trailing newline.
func password(secret []byte) string {
	return strings.TrimSuffix(string(secret), "\n")
}
