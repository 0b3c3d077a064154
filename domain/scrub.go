package domain

import (
	"net/url"
	"slices"
	"strings"
)

// secretIndex is every distinct password the loop knows, in each form an error may quote it
// (raw, query-escaped, path-escaped), indexed by length: which of them a text holds is found in
// the text's length times the number of distinct lengths, whatever the number of consumers.
type secretIndex struct {
	forms   map[string]int  // a form: how many of the loop's passwords have it
	lengths map[int]int     // a length: how many forms have it
	sorted  []int           // the lengths, longest first; made again when nil
	starred map[string]bool // forms holding '*', which scrubbing another form may make: always tried
}

// formsOf are the distinct forms of pw.
func formsOf(pw string) []string {
	forms := []string{pw}
	for _, f := range []string{url.QueryEscape(pw), url.PathEscape(pw)} {
		if !slices.Contains(forms, f) {
			forms = append(forms, f)
		}
	}
	return forms
}

// add counts the forms of pw in.
func (x *secretIndex) add(pw string) {
	if x.forms == nil {
		x.forms, x.lengths, x.starred = map[string]int{}, map[int]int{}, map[string]bool{}
	}
	for _, f := range formsOf(pw) {
		x.forms[f]++
		if x.forms[f] > 1 {
			continue
		}
		if x.lengths[len(f)]++; x.lengths[len(f)] == 1 {
			x.sorted = nil
		}
		if strings.Contains(f, "*") {
			x.starred[f] = true
		}
	}
}

// remove counts the forms of pw out.
func (x *secretIndex) remove(pw string) {
	for _, f := range formsOf(pw) {
		if x.forms[f]--; x.forms[f] > 0 {
			continue
		}
		delete(x.forms, f)
		delete(x.starred, f)
		if x.lengths[len(f)]--; x.lengths[len(f)] == 0 {
			delete(x.lengths, len(f))
			x.sorted = nil
		}
	}
}

// in answers the forms text holds (and every form holding '*'), longest first, then in byte
// order: the order they are scrubbed in, the same on every pass.
func (x *secretIndex) in(text string) []string {
	if len(x.forms) == 0 {
		return nil
	}
	if x.sorted == nil {
		x.sorted = make([]int, 0, len(x.lengths))
		for n := range x.lengths {
			x.sorted = append(x.sorted, n)
		}
		slices.Sort(x.sorted)
		slices.Reverse(x.sorted)
	}
	var found []string
	for _, n := range x.sorted {
		for i := 0; i+n <= len(text); i++ {
			if f := text[i : i+n]; x.forms[f] > 0 && !slices.Contains(found, f) {
				found = append(found, f)
			}
		}
	}
	for f := range x.starred {
		if !slices.Contains(found, f) {
			found = append(found, f)
		}
	}
	slices.SortFunc(found, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	return found
}

// Scrub is text with password removed, raw, query-escaped and path-escaped: the forms an
// error or a URL may carry it in. It is the one redaction of the project: the loop scrubs
// every error it says with it, and app the database URL's password from what it says of it.
func Scrub(text, password string) string {
	if password == "" {
		return text
	}
	for _, form := range []string{password, url.QueryEscape(password), url.PathEscape(password)} {
		text = strings.ReplaceAll(text, form, "***")
	}
	return text
}
