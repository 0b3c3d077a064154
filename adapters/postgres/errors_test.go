package postgres_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/ports"
	"github.com/novox/postgres-provider/tests/pgserver"
)

// TestErrorsCarryAKind: the loop backs off what is refused or invalid and not what is transient,
// so each of the adapter's errors says which it is, and none promises what happens next.
func TestErrorsCarryAKind(t *testing.T) {
	e := newEnv(t)
	kinds := []error{ports.ErrRefused, ports.ErrInvalid, ports.ErrTransient}
	free, err := pgserver.FreeAddr()
	is.New(t).NoErr(err)
	nobody := e.backend("postgres://nobody@" + free + "/postgres?connect_timeout=5")
	cases := []struct {
		name  string
		setup func(p *ports.Provision) *postgres.Backend
		kind  error
	}{
		{"invalid login", func(p *ports.Provision) *postgres.Backend { p.As = `let"ta`; return e.b }, ports.ErrInvalid},
		{"reserved database", func(p *ports.Provision) *postgres.Backend { p.Values["name"] = "template1"; return e.b }, ports.ErrInvalid},
		{"empty password", func(p *ports.Provision) *postgres.Backend { p.Password = ""; return e.b }, ports.ErrInvalid},
		{"a superuser's role", func(p *ports.Provision) *postgres.Backend {
			e.exec("", "CREATE ROLE "+p.As+" SUPERUSER LOGIN")
			t.Cleanup(func() { e.exec("", "DROP ROLE IF EXISTS "+p.As) })
			return e.b
		}, ports.ErrRefused},
		{"another role's database", func(p *ports.Provision) *postgres.Backend {
			e.exec("", "CREATE ROLE "+p.As+"_bob", "CREATE DATABASE "+p.As+" OWNER "+p.As+"_bob")
			return e.b
		}, ports.ErrRefused},
		{"a server nobody answers at", func(*ports.Provision) *postgres.Backend { return nobody }, ports.ErrTransient},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			p := provision(name("kind"))
			err := errOf(c.setup(&p).Create(ctx, p))
			is.True(err != nil)             // refused
			is.True(errors.Is(err, c.kind)) // of its kind
			for _, k := range kinds {
				is.True(k == c.kind || !errors.Is(err, k)) // and of no other
			}
			is.True(!strings.Contains(err.Error(), "next pass")) // no promise of what happens next
			is.True(!strings.Contains(err.Error(), "tried again"))
		})
	}
}
