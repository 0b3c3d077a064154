package app

import (
	"flag"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/ports"
)

// naming is the backend's flags with its connection string conn, as --database-url sets it.
func naming(t *testing.T, conn string) ports.Kind {
	t.Helper()
	k := newKind()
	fs := flag.NewFlagSet("provisioner", flag.ContinueOnError)
	k.Flags(fs)
	if err := fs.Set("database-url", conn); err != nil {
		t.Fatal(err)
	}
	return k
}

func TestRedactHidesTheConnectionStringsPassword(t *testing.T) {
	for _, c := range []struct{ name, conn, text string }{
		{"a URL's user information", "postgres://admin:s3cr%2Ft@db:5432/postgres", "bad: s3cr/t, s3cr%2Ft, s3cr%2Ft"},
		{"a URL's password parameter", "postgres://admin@db/postgres?password=s3cr%2Ft", "bad: s3cr/t and s3cr%2Ft"},
		{"key=value", "host=db password=s3cr/t port=5432", "bad: s3cr/t, s3cr%2Ft"},
		{"a URL naming several hosts", "postgres://admin:s3cr%2Ft@db1:5432,db2:5433/postgres?target_session_attrs=read-write",
			"bad: s3cr/t, s3cr%2Ft"},
		{"a URL naming an IPv6 host among several", "postgresql://admin:s3cr%2Ft@[::1]:5432,db2/postgres?target_session_attrs=primary",
			"bad: s3cr/t, s3cr%2Ft"},
		{"a password parameter beside an IPv6 host among several", "postgresql://admin@[::1]:5432,db2/postgres?password=s3cr%2Ft",
			"bad: s3cr/t, s3cr%2Ft"},
		{"key=value, quoted", "host=db password='s3cr/t'", "bad: 's3cr/t'"},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			got := redact(c.text, naming(t, c.conn))
			is.True(!strings.Contains(got, "s3cr"))                                           // no form of the password left
			is.True(strings.Contains(got, "bad: ***") || strings.Contains(got, "bad: '***'")) // replaced where it stood
		})
	}
	is := is.New(t)
	is.Equal(redact("no password here", naming(t, "postgres://admin@db/postgres")), "no password here") // nothing to hide, nothing changed
	is.Equal(redact("bad: ", naming(t, "postgres://admin:@db/postgres")), "bad: ")                      // an empty password replaces nothing
}
