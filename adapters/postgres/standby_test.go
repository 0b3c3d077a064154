package postgres_test

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/ports"
	"github.com/novox/postgres-provider/tests/pgserver"
)

// pair is a primary and its streaming standby, of the test's own.
type pair struct {
	primary, standby *pgserver.Server
}

func newPair(t *testing.T) pair {
	t.Helper()
	if !pgserver.Available() {
		t.Skip("a primary and its standby need server binaries on this machine")
	}
	primary, err := pgserver.Start(pgserver.Options{})
	is.New(t).NoErr(err) // a primary
	t.Cleanup(func() { _ = primary.Stop() })
	standby, err := primary.StartStandby(pgserver.Options{})
	is.New(t).NoErr(err) // its standby
	t.Cleanup(func() { _ = standby.Stop() })
	return pair{primary, standby}
}

// addr is a server's host:port.
func addr(s *pgserver.Server) string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

// hosts is the primary's URL naming servers' hosts, in their order, with query added.
func hosts(t *testing.T, base string, query string, servers ...*pgserver.Server) string {
	t.Helper()
	u, err := url.Parse(base)
	is.New(t).NoErr(err)
	var hs []string
	for _, s := range servers {
		hs = append(hs, addr(s))
	}
	u.Host = strings.Join(hs, ",")
	if query != "" {
		u.RawQuery += "&" + query
	}
	return u.String()
}

// Every target_session_attrs value, on a URL naming the standby first and then its primary:
// each picks the server libpq would, and a standby picked is the server's problem, named, with
// nothing asked of it; on the primary every kind of session works, read-only ones included.
func TestEveryTargetSessionAttrsOnAPrimaryAndItsStandby(t *testing.T) {
	p := newPair(t)
	e := &env{t: t, srv: &pgserver.TestServer{URL: p.primary.URL, Local: p.primary}, log: &recLogger{}}
	e.b = e.backend(p.primary.URL)
	for _, c := range []struct {
		attrs   string
		primary bool // the session is the primary's
	}{
		{"", false}, {"any", false}, {"read-write", true}, {"primary", true},
		{"read-only", false}, {"standby", false}, {"prefer-standby", false},
	} {
		t.Run("target_session_attrs="+c.attrs, func(t *testing.T) {
			is := is.New(t)
			query := ""
			if c.attrs != "" {
				query = "target_session_attrs=" + c.attrs
			}
			u := hosts(t, p.primary.URL, query, p.standby, p.primary)
			resource := name("tsa")
			b := e.backendWith(postgres.Config{URL: u, Resource: resource})
			is.Equal(b.Server(), "postgres@"+addr(p.standby)+","+addr(p.primary)) // every host named
			lease := b.Lease()
			defer lease.Close()
			_, err := b.Managed(ctx)
			leaseErr := lease.Held(ctx)
			if !c.primary {
				is.True(errors.Is(err, ports.ErrInRecovery))      // the standby is the server's problem
				is.True(errors.Is(leaseErr, ports.ErrInRecovery)) // for the lease too
				is.Equal(err.Error(), "the server postgres@"+addr(p.standby)+" is a standby (read only)")
				is.Equal(leaseErr.Error(), err.Error())
				is.True(!lease.Leader())
				return
			}
			is.NoErr(err)      // the primary's record
			is.NoErr(leaseErr) // its lease
			is.True(lease.Leader())
			made := provision(name("tsa"), "pg_trgm")
			is.NoErr(errOf(b.Create(ctx, made))) // made on the primary
			e.exec(made.As, "DROP EXTENSION pg_trgm")
			held, err := holdsOne(ctx, b, made)
			is.NoErr(err)       // checked, on a read-only session to its database that the URL's test let through
			is.True(!held.Held) // and the dropped extension seen
			is.NoErr(errOf(b.Create(ctx, made)))
			held, err = holdsOne(ctx, b, made)
			is.NoErr(err)
			is.True(held.Held) // made again
			plan := e.backendWith(postgres.Config{URL: u, Resource: resource, ReadOnly: true})
			_, err = plan.Managed(ctx)
			is.NoErr(err) // a read-only backend passes the URL's test
			held, err = holdsOne(ctx, plan, made)
			is.NoErr(err)
			is.True(held.Held)
			is.Equal(len(plan.Foresee(ctx, []ports.Provision{provision(name("tsa"))}, postgres.DefaultTimeout)), 1)
			err = errOf(plan.Create(ctx, provision(name("tsa"))))
			is.True(err != nil && strings.Contains(err.Error(), "25006")) // and the server still keeps it from writing
		})
	}
}

// A standby alone, named by a plain URL: no lock taken there, nothing asked but whether it is
// one. The URL asking for a primary where none is up says so, naming each host; promoted, the
// standby is used at once.
func TestAStandbyIsTheServersProblemUntilItIsPromoted(t *testing.T) {
	is := is.New(t)
	p := newPair(t)
	e := &env{t: t, srv: &pgserver.TestServer{URL: p.standby.URL, Local: p.standby}, log: &recLogger{}}
	b := e.backendWith(postgres.Config{URL: p.standby.URL, Resource: name("standby")})
	lease := b.Lease()
	defer lease.Close()
	for range 3 {
		err := lease.Held(ctx)
		is.True(errors.Is(err, ports.ErrInRecovery))
		is.Equal(err.Error(), "the server postgres@"+addr(p.standby)+" is a standby (read only)")
		_, err = b.Managed(ctx)
		is.True(errors.Is(err, ports.ErrInRecovery))
	}
	var locks int
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").Scan(&locks))
	is.Equal(locks, 0) // no lease held on a standby

	ha := hosts(t, p.primary.URL, "target_session_attrs=read-write", p.primary, p.standby)
	both := e.backendWith(postgres.Config{URL: ha, Resource: name("ha")})
	bothLease := both.Lease()
	defer bothLease.Close()
	is.NoErr(bothLease.Held(ctx)) // on the primary
	p.primary.StopImmediate()
	err := bothLease.Held(ctx)
	is.True(err != nil && !bothLease.Leader()) // lost with the primary
	for range 3 {                              // once it has stepped back
		if err = bothLease.Held(ctx); errors.Is(err, ports.ErrInRecovery) {
			break
		}
	}
	is.True(errors.Is(err, ports.ErrInRecovery)) // no primary: the server's problem
	is.Equal(err.Error(), "the server postgres@"+addr(p.primary)+","+addr(p.standby)+" has no primary the provider can reach "+
		"(target_session_attrs): "+addr(p.standby)+" is a standby (read only), "+addr(p.primary)+" cannot be reached")
	_, err = both.Managed(ctx)
	is.True(errors.Is(err, ports.ErrInRecovery))

	is.NoErr(p.standby.Promote())
	is.NoErr(lease.Held(ctx)) // the plain URL's lease, on the promoted server
	_, err = b.Managed(ctx)
	is.NoErr(err)
	is.NoErr(errOf(b.Create(ctx, provision(name("promoted"))))) // which takes writes
	is.NoErr(bothLease.Held(ctx))                               // and the URL naming both finds it
	_, err = both.Managed(ctx)
	is.NoErr(err)
	is.NoErr(errOf(both.Create(ctx, provision(name("promoted")))))
}
