// The passwords a connection string carries, which nothing said about it may show.

package postgres

import (
	"net/url"
	"slices"
	"strings"
)

// passwordsIn are the passwords conn carries: a URL's user information and its password
// parameter, or each password=... of a key=value string (quotes trimmed); empty ones left out.
func passwordsIn(conn string) []string {
	var found []string
	if u, err := url.Parse(conn); err == nil && u.Scheme != "" {
		if pw, ok := u.User.Password(); ok {
			found = append(found, pw)
		}
		found = append(found, u.Query()["password"]...)
	} else if scheme, rest, ok := strings.Cut(conn, "://"); ok && (scheme == "postgres" || scheme == "postgresql") {
		found = append(found, urlPasswords(rest)...)
	} else {
		for _, field := range strings.Fields(conn) {
			if k, v, ok := strings.Cut(field, "="); ok && k == "password" {
				found = append(found, strings.Trim(v, "'"))
			}
		}
	}
	return slices.DeleteFunc(found, func(pw string) bool { return pw == "" })
}

// urlPasswords are the passwords of a URL after its scheme that net/url refuses, as libpq
// accepts it: several hosts of which one is an IPv6 address ([::1]:5432,db:5433), which
// net/url takes for a bad port. The user information runs to the last @ before the path.
func urlPasswords(rest string) []string {
	var found []string
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		if _, pw, ok := strings.Cut(authority[:at], ":"); ok {
			found = append(found, pw)
			if decoded, err := url.PathUnescape(pw); err == nil {
				found = append(found, decoded)
			}
		}
	}
	if _, query, ok := strings.Cut(tail, "?"); ok {
		query, _, _ = strings.Cut(query, "#")
		if values, err := url.ParseQuery(query); err == nil {
			found = append(found, values["password"]...)
		}
	}
	return found
}
