package app

import (
	"net/url"
	"slices"
	"strings"

	"github.com/novox/postgres-provider/domain"
)

// redact is text with the password of the connection string conn removed, for a message
// about conn: a parser or a driver may quote the string it was given. conn is a URL
// (postgres://user:password@host/db) or libpq's key=value form (password=...).
func redact(text, conn string) string {
	for _, password := range passwordsIn(conn) {
		text = domain.Scrub(text, password)
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
