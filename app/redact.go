package app

import (
	"net/url"
	"slices"
	"strings"
)

// redact is text with the password of the connection string conn removed, for a message
// about conn: a parser or a driver may quote the string it was given. conn is a URL
// (postgres://user:password@host/db) or libpq's key=value form (password=...).
func redact(text, conn string) string {
	for _, password := range passwordsIn(conn) {
		text = scrub(text, password)
	}
	return text
}

// passwordsIn are the passwords conn carries: a URL's user information and its password
// parameter, or each password=... of a key=value string (quotes trimmed); empty ones left out.
func passwordsIn(conn string) []string {
	var found []string
	if u, err := url.Parse(conn); err == nil && u.Scheme != "" {
		if pw, ok := u.User.Password(); ok {
			found = append(found, pw)
		}
		found = append(found, u.Query()["password"]...)
	} else {
		for _, field := range strings.Fields(conn) {
			if k, v, ok := strings.Cut(field, "="); ok && k == "password" {
				found = append(found, strings.Trim(v, "'"))
			}
		}
	}
	return slices.DeleteFunc(found, func(pw string) bool { return pw == "" })
}

// scrub is text with password removed, raw, query-escaped and path-escaped: the forms a URL
// may carry it in. It is the domain's scrub (domain/say.go), word for word, so that a
// password reads the same (***) wherever it was removed.
func scrub(text, password string) string {
	if password == "" {
		return text
	}
	for _, form := range []string{password, url.QueryEscape(password), url.PathEscape(password)} {
		text = strings.ReplaceAll(text, form, "***")
	}
	return text
}
