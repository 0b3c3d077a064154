package domain

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// maxChangesSaid is the most changes of an entry a line names; the rest are counted.
const maxChangesSaid = 8

// entryChanges says what a consumer's entry changed from was to now, as an operator reads it:
// per field of values and derived (derived.settings per setting), a list's elements added and
// removed (derived.extensions: +vector, -dblink), any other value as it was and is now. The
// backend is not asked: these are the entry's words, whatever backend makes them.
func entryChanges(was, now contribution) []string {
	var out []string
	out = appendChanges(out, "values", was.Values(), now.Values())
	out = appendChanges(out, "derived", was.Derived(), now.Derived())
	if len(out) > maxChangesSaid {
		out = append(out[:maxChangesSaid], fmt.Sprintf("%d more", len(out)-maxChangesSaid))
	}
	return out
}

// appendChanges adds the changes under prefix from was to now to out, key by key in order.
func appendChanges(out []string, prefix string, was, now map[string]any) []string {
	keys := make([]string, 0, len(was)+len(now))
	for k := range was {
		keys = append(keys, k)
	}
	for k := range now {
		if _, ok := was[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		a, hadA := was[k]
		b, hasB := now[k]
		if hadA == hasB && reflect.DeepEqual(a, b) {
			continue
		}
		name := prefix + "." + k
		am, aMap := a.(map[string]any)
		bm, bMap := b.(map[string]any)
		al, aList := a.([]any)
		bl, bList := b.([]any)
		switch {
		case (aMap || !hadA) && (bMap || !hasB) && (aMap || bMap):
			out = appendChanges(out, name, am, bm)
		case (aList || !hadA) && (bList || !hasB) && (aList || bList):
			out = append(out, name+": "+listChange(al, bl))
		default:
			out = append(out, name+": "+shown(a, hadA)+" -> "+shown(b, hasB))
		}
	}
	return out
}

// listChange is what was added to a list (+x) and removed from it (-x), in the lists' order;
// the same elements in another order are "reordered".
func listChange(was, now []any) string {
	var words []string
	for _, x := range now {
		if !containsValue(was, x) {
			words = append(words, "+"+shown(x, true))
		}
	}
	for _, x := range was {
		if !containsValue(now, x) {
			words = append(words, "-"+shown(x, true))
		}
	}
	if len(words) == 0 {
		return "reordered"
	}
	return strings.Join(words, ", ")
}

func containsValue(list []any, x any) bool {
	for _, y := range list {
		if reflect.DeepEqual(x, y) {
			return true
		}
	}
	return false
}

// shown is a value as a line shows it: a string as it is, anything else as JSON, and "(none)"
// where there was none.
func shown(v any, present bool) string {
	if !present {
		return "(none)"
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
