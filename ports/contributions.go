package ports

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// The contributions' vocabulary: what a consumer's entry asks of any backend, read from
// Provision.Values and Provision.Derived in one place. A backend adds its own checks of the
// names (what its server allows); where one of these readers fails, what it answers holds
// every entry read up to and including the one the error is about, so that a backend checks
// their names before it says the error, and the first thing wrong is said whatever the backend.

// Extension is one of values.extensions.
type Extension struct {
	// Name is the extension's name, unchecked: the backend says what names it allows.
	Name string
	// Version is the version the entry pins, never empty but otherwise unchecked, where
	// Pinned; else the server's default is wanted.
	Version string
	Pinned  bool
}

// Setting is one of derived.settings: its value as text ("30s", "on", "8"), or none where the
// entry names it null, which resets it.
type Setting struct {
	Name  string
	Value *string
}

// Database names the consumer's database: derived.database wins over values.name; where neither
// names one, the database is named after the login.
func (p Provision) Database() (string, error) {
	for _, src := range []struct {
		where string
		m     map[string]any
		key   string
	}{{"derived", p.Derived, "database"}, {"values", p.Values, "name"}} {
		v, ok := src.m[src.key]
		if !ok || v == nil {
			continue
		}
		s, isString := v.(string)
		if !isString {
			return "", fmt.Errorf("%s.%s is %T, not a string", src.where, src.key, v)
		}
		if s != "" {
			return s, nil
		}
	}
	return p.As, nil
}

// Extensions reads values.extensions: a list whose items are an extension's name (wanted at the
// server's default version) or {"name": ..., "version": ...} (wanted at that version), each name
// once. A name given twice must want the same version.
func (p Provision) Extensions() ([]Extension, error) {
	v, ok := p.Values["extensions"]
	if !ok || v == nil {
		return nil, nil
	}
	list, isList := v.([]any)
	if !isList {
		return nil, fmt.Errorf("values.extensions is %T, not a list", v)
	}
	out := make([]Extension, 0, len(list))
	wants := map[string]Extension{}
	for _, item := range list {
		e, named, err := extensionEntry(item)
		if named {
			if err == nil {
				if was, seen := wants[e.Name]; seen {
					if was.Version != e.Version {
						return append(out, e), fmt.Errorf("values.extensions names %s twice, at %s and at %s", e.Name,
							versionWord(was.Version), versionWord(e.Version))
					}
					continue
				}
			}
			out = append(out, e)
		}
		if err != nil {
			return out, err
		}
		wants[e.Name] = e
	}
	return out, nil
}

// extensionEntry reads one item of values.extensions; named is whether it got as far as a name.
func extensionEntry(item any) (e Extension, named bool, err error) {
	switch x := item.(type) {
	case string:
		return Extension{Name: x}, true, nil
	case map[string]any:
		for k := range x {
			if k != "name" && k != "version" {
				return e, false, fmt.Errorf("values.extensions holds an entry with %q: an entry names only name and version", k)
			}
		}
		name, isString := x["name"].(string)
		if !isString {
			return e, false, fmt.Errorf("values.extensions holds an entry whose name is %T, not a string", x["name"])
		}
		v, given := x["version"]
		if !given {
			return Extension{Name: name}, true, nil
		}
		version, isString := v.(string)
		if !isString {
			return Extension{Name: name}, true, fmt.Errorf("values.extensions: extension %s: version is %T, not a string", name, v)
		}
		if version == "" {
			return Extension{Name: name}, true, fmt.Errorf("values.extensions: extension %s: version is empty (name it as a plain string for the server's default)", name)
		}
		return Extension{Name: name, Version: version, Pinned: true}, true, nil
	}
	return e, false, fmt.Errorf("values.extensions holds %T %s, not a name", item, printable(item))
}

// versionWord is a version as a line says it: "" is the server's default.
func versionWord(v string) string {
	if v == "" {
		return "the server's default"
	}
	return v
}

// printable is v as fmt prints it, quoted where that holds what a terminal or a line would
// take for more than text (control characters, bidirectional marks): it comes from the file.
func printable(v any) string {
	s := fmt.Sprint(v)
	if q := strconv.QuoteToASCII(s); q[1:len(q)-1] != s {
		return q
	}
	return s
}

// ConnectionLimit reads derived.connection_limit: a whole number of connections, -1 for none;
// named is false where the entry names none.
func (p Provision) ConnectionLimit() (n int, named bool, err error) {
	v, ok := p.Derived["connection_limit"]
	if !ok || v == nil {
		return 0, false, nil
	}
	f, isNumber := v.(float64)
	if !isNumber || f != float64(int(f)) || f < -1 || f > 1<<20 {
		return 0, false, fmt.Errorf("derived.connection_limit is %v, not a whole number of connections (-1 for no limit)", v)
	}
	return int(f), true, nil
}

// Settings reads derived.settings: an object of names to strings, numbers, true/false, or null
// (reset), in the order of their names, whatever the map's: the same statements and drift every
// time. Its errors say which name and why.
func (p Provision) Settings() ([]Setting, error) {
	v, ok := p.Derived["settings"]
	if !ok || v == nil {
		return nil, nil
	}
	m, isObject := v.(map[string]any)
	if !isObject {
		return nil, fmt.Errorf("derived.settings is %T, not an object of settings", v)
	}
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]Setting, 0, len(m))
	for _, name := range names {
		value, err := settingValue(name, m[name])
		out = append(out, Setting{Name: name, Value: value})
		if err != nil {
			return out, fmt.Errorf("derived.settings: %w", err)
		}
	}
	return out, nil
}

// settingValue is v as a setting's value: text as it is, a whole number in decimal, true/false
// as on/off, nil as none. Text is plain: no control characters, at most 256 bytes.
func settingValue(name string, v any) (*string, error) {
	var s string
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		s = v
	case bool:
		s = "off"
		if v {
			s = "on"
		}
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return nil, fmt.Errorf("setting %s: %v is not a value", name, v)
		}
		s = strconv.FormatFloat(v, 'f', -1, 64)
	default:
		return nil, fmt.Errorf("setting %s is %T, not a string, number, true/false or null", name, v)
	}
	if len(s) > 256 {
		return nil, fmt.Errorf("setting %s: its value is longer than 256 bytes", name)
	}
	if strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return nil, fmt.Errorf("setting %s: its value holds a control character", name)
	}
	return &s, nil
}
