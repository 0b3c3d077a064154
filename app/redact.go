package app

import (
	"net/url"
	"strings"
)

// redact is text with the password of a connection URL replaced, for messages about it.
func redact(text, connURL string) string {
	u, err := url.Parse(connURL)
	if err != nil || u.User == nil {
		return redactKeyValue(text, connURL)
	}
	if pw, ok := u.User.Password(); ok && pw != "" {
		for _, form := range []string{pw, url.QueryEscape(pw), url.PathEscape(pw)} {
			text = strings.ReplaceAll(text, form, "xxxxx")
		}
	}
	return text
}

// redactKeyValue hides password=... of a key=value connection string.
func redactKeyValue(text, conn string) string {
	for _, field := range strings.Fields(conn) {
		if k, v, ok := strings.Cut(field, "="); ok && k == "password" && v != "" {
			text = strings.ReplaceAll(text, strings.Trim(v, "'"), "xxxxx")
		}
	}
	return text
}
