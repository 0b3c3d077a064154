package domain

import (
	"net/url"
	"strings"
)

// scrub is text with each password removed, raw, query-escaped and path-escaped.
func scrub(text string, passwords ...string) string {
	for _, p := range passwords {
		if p == "" {
			continue
		}
		for _, form := range []string{p, url.QueryEscape(p), url.PathEscape(p)} {
			text = strings.ReplaceAll(text, form, "***")
		}
	}
	return text
}
