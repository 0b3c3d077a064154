package domain

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"time"
)

// entry is one entry of the contributions file's given list, as the file has it.
type entry struct {
	As      string         `json:"as"`
	Secret  string         `json:"secret"`
	Node    string         `json:"node"`
	At      string         `json:"at"`
	Values  map[string]any `json:"values"`
	Derived map[string]any `json:"derived"`
}

// contribution is what the loop keeps of an entry that grants a credential. Its values and
// derived are kept as their canonical JSON (sorted keys, no spaces), a few dozen bytes each,
// where the decoded maps cost some 900 bytes a consumer (100,000 consumers: 90 MB); they are
// decoded when the backend is asked (item.provision) or a change of the entry is said.
type contribution struct {
	As, Secret, Node, At string
	values, derived      string

	// shape is the digest of what the consumer asked for, but its password: the login, values
	// and derived. It is computed once per parse, so that a pass hashes only the password.
	shape [sha256.Size]byte
}

// Values and Derived are the entry's values and derived, decoded anew: the caller's to keep.
func (g contribution) Values() map[string]any  { return decoded(g.values) }
func (g contribution) Derived() map[string]any { return decoded(g.derived) }

// maxFile is the most the loop reads of the contributions file. A file listing 100,000
// consumers, pretty-printed with long secret paths, is about 40 MB; one larger than this is a
// mistake (a wrong path, a log file), and reading it whole would cost the process its memory.
var maxFile int64 = 64 << 20

// contents is what the loop remembers of the contributions file between passes: what it was
// when last read, when that last changed, and what it said, so that an unchanged file is not
// parsed again.
type contents struct {
	read      bool
	id        fileID
	digest    [sha256.Size]byte
	changedAt time.Time // when id or digest last changed: the file has been settled since
	firstRead time.Time // when this process first read it

	why   string         // why the file says nothing, "" when it is usable
	given []contribution // the credential grants, first entry per login
	bad   int            // entries that could not be decoded
	said  map[string]bool
	// twice are the logins listed more than once that were said, and dup those the content
	// read last lists more than once. A login is said again only once the file has settled
	// without it listed twice: the states a file passes through while it is rewritten in place
	// say nothing again.
	twice, dup map[string]bool
	// warning is why the file said nothing, as last said.
	warning string
	parses  int // how often a content was parsed, for the tests that show it is not parsed again
}

// readContributions answers the consumers asked for, and whether the file was usable. Nothing
// read is not nobody asking: only a file that was read can withdraw.
func (h *Harness) readContributions() ([]contribution, bool) {
	// The file's digest first, through a small buffer; the file is read whole and parsed
	// only when its content changed. Not even the digest (30 ms at 100,000 consumers) where its
	// identity is as it was when last read, change time included: that moves with every write
	// (a chmod too), and no writer can set it back.
	digest, id, err := h.file.digest, h.file.id, error(nil)
	if !h.sameFile() {
		digest, id, err = h.digestStable(h.cfg.Receives, maxFile)
	}
	var raw []byte
	if err == nil && (!h.file.read || digest != h.file.digest) {
		raw, id, err = h.readStable(h.cfg.Receives, maxFile)
		digest = sha256.Sum256(raw)
	}
	if err != nil {
		if errors.Is(err, errChanged) {
			h.file.changedAt = h.clock.Now()
		}
		h.warn(fmt.Sprintf("contributions file unreadable (%s): %v", h.cfg.Receives, err))
		return nil, false
	}
	switch now := h.clock.Now(); {
	case !h.file.read:
		// At a start, the file has been as it is since it was last written.
		h.file.changedAt, h.file.firstRead = now, now
		if mtime := time.Unix(0, id.mtime); mtime.Before(now) {
			h.file.changedAt = mtime
		}
	case id != h.file.id || digest != h.file.digest:
		h.file.changedAt = now
	}
	if !h.file.read || digest != h.file.digest {
		h.parse(raw)
	}
	h.file.read, h.file.id, h.file.digest = true, id, digest
	if len(h.file.twice) > len(h.file.dup) && h.settled(false) >= h.cfg.WithdrawSettle {
		h.file.twice = maps.Clone(h.file.dup) // put right, and settled so: said again should it come back
	}
	h.warn(h.file.why) // that the file is readable again comes before what it says, as in the spec
	for _, e := range h.deferred {
		h.log.Log(e)
	}
	h.deferred = h.deferred[:0]
	if h.file.why != "" {
		return nil, false
	}
	return h.file.given, true
}

// sameFile is whether the contributions file is, by one stat, the regular file last read, as
// it was then: the same inode, size, modification and change times.
func (h *Harness) sameFile() bool {
	if !h.file.read || h.file.id.ctime == 0 {
		return false // a file system that gives no change time is digested every pass
	}
	fi, err := h.fs.Stat(h.cfg.Receives)
	return err == nil && fi.Mode().IsRegular() && h.idOf(h.cfg.Receives, fi) == h.file.id
}

// settled is how long the contributions file has stayed as it is now. For a mass withdrawal
// it is counted from no earlier than this process's first read: a daemon started on a stale
// file that leaves out most of what is managed (the wrong path, an old copy) holds the
// withdrawal for its full time, mtime or not. Under Once there is no later pass to wait for,
// and the file's mtime stands.
func (h *Harness) settled(mass bool) time.Duration {
	from := h.file.changedAt
	if mass && !h.cfg.Once && from.Before(h.file.firstRead) {
		from = h.file.firstRead
	}
	return h.clock.Now().Sub(from)
}

// parse decodes the file into h.file. Each entry is decoded on its own: one that cannot be is
// said once, and the others stand.
func (h *Harness) parse(raw []byte) {
	f := &h.file
	f.why, f.given, f.bad = "", nil, 0
	f.parses++
	var doc struct {
		Requirement string          `json:"requirement"`
		Given       json.RawMessage `json:"given"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		f.why = fmt.Sprintf("contributions file is not JSON (%s): %v", h.cfg.Receives, err)
		return
	}
	if doc.Requirement != "" && doc.Requirement != h.cfg.Resource {
		f.why = fmt.Sprintf("%s is for %s, not %s", h.cfg.Receives, doc.Requirement, h.cfg.Resource)
		return
	}
	var entries []json.RawMessage
	if len(doc.Given) == 0 || string(doc.Given) == "null" || json.Unmarshal(doc.Given, &entries) != nil {
		f.why = fmt.Sprintf("%s has no given list", h.cfg.Receives)
		return
	}
	said := make(map[string]bool)
	given := make([]entry, 0, len(entries))
	for i, e := range entries {
		var g entry
		if err := json.Unmarshal(e, &g); err != nil {
			f.bad++
			as, line := h.badEntry(i, e, err)
			if !f.said[line] {
				h.later(slog.LevelWarn, as, "%s", line)
			}
			said[line] = true
			continue
		}
		given = append(given, g)
	}
	f.said = said
	f.given = h.grants(given)
}

// badEntry is the line that says entry i of the file could not be decoded, and the login it
// names, if any.
func (h *Harness) badEntry(i int, raw json.RawMessage, err error) (string, string) {
	var named struct {
		As any `json:"as"`
	}
	_ = json.Unmarshal(raw, &named)
	as, _ := named.As.(string)
	who := ""
	if as != "" {
		who = " (" + as + ")"
	}
	why := err.Error()
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			why = fmt.Sprintf("%s is %s, not %s", te.Field, article(te.Value), kindOf(te.Type))
		} else {
			why = fmt.Sprintf("it is %s, not an object", article(te.Value))
		}
	}
	return as, fmt.Sprintf("%s: given[%d]%s cannot be read: %s; the other entries are applied, and nothing is "+
		"withdrawn while the file has an entry that cannot be read", h.cfg.Receives, i, who, why)
}

func article(jsonKind string) string {
	switch jsonKind {
	case "array", "object":
		return "an " + jsonKind
	default:
		return "a " + jsonKind
	}
}

func kindOf(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice:
		return "an array"
	case reflect.String:
		return "a string"
	default:
		return t.Kind().String()
	}
}

// grants keeps the entries that grant a credential: those with both `as` and `secret`. Where a
// login is listed twice, the first entry wins, and that is said once; applying both would flip
// the consumer between two passwords on every pass.
func (h *Harness) grants(given []entry) []contribution {
	out := make([]contribution, 0, len(given))
	seen := make(map[string]bool, len(given))
	dup := map[string]bool{}
	if h.file.twice == nil {
		h.file.twice = map[string]bool{}
	}
	for _, g := range given {
		if g.As == "" || g.Secret == "" {
			continue
		}
		if seen[g.As] {
			if !h.file.twice[g.As] {
				h.later(slog.LevelWarn, g.As, "%s: listed more than once in %s; using the first entry", g.As, h.cfg.Receives)
			}
			dup[g.As], h.file.twice[g.As] = true, true
			continue
		}
		seen[g.As] = true
		out = append(out, kept(g))
	}
	h.file.dup = dup
	return out
}

// warn says why the file said nothing, once until the reason changes, and once when it is
// usable again.
func (h *Harness) warn(why string) {
	if why == h.file.warning {
		return
	}
	if why != "" {
		h.say(slog.LevelWarn, "", "%s; nothing applied or removed until it can be read", why)
	} else {
		h.say(slog.LevelInfo, "", "contributions file readable again")
	}
	h.file.warning = why
}

// kept is what the loop keeps of the granting entry g: its maps in canonical form (a missing
// one is empty), and its shape, the digest of what it asks for but its password. Derived is in
// it: a provider that renames what it derives gave a different resource. The maps are written
// with sorted keys, so the same request written in another order is the same shape; the digest
// is of [as, values, derived], as one JSON array.
func kept(g entry) contribution {
	as, _ := json.Marshal(g.As)
	values, derived := canonical(g.Values), canonical(g.Derived)
	return contribution{As: g.As, Secret: g.Secret, Node: g.Node, At: g.At, values: values, derived: derived,
		shape: sha256.Sum256([]byte("[" + string(as) + "," + values + "," + derived + "]"))}
}

// canonical is m as JSON with sorted keys, "{}" where it is nil. What JSON decoded encodes
// without error.
func canonical(m map[string]any) string {
	if m == nil {
		return "{}"
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// decoded is the object whose canonical JSON is s, never nil. What canonical wrote decodes
// without error.
func decoded(s string) map[string]any {
	m := map[string]any{}
	_ = json.Unmarshal([]byte(s), &m)
	return m
}
