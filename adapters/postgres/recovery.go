// A server in recovery (a standby) and URLs naming several hosts: which server a session
// reached, the URL's own test of it (target_session_attrs), and read-only sessions.

package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A URL may name several hosts (host1:port1,host2:port2), and say with target_session_attrs
// which of them a session takes (any, read-write, read-only, primary, standby, prefer-standby):
// pgx tries them in order as libpq does, and tests each with ValidateConnect before a session
// is handed over. That test sees the server's own state: nothing the provider sets for its own
// sessions may change it, so a read-only session is made read only after it (readOnlyAfter).
// Whatever the URL picked, a server in recovery is no server to write to: the lease's session
// and the record's round trip ask pg_is_in_recovery(), and a standby is the server's problem
// (ports.ErrInRecovery), said once, before anything is created, checked or withdrawn.

// hostsOf are the distinct host:port pairs cc names, in its order (pgx lists a host once per
// TLS attempt).
func hostsOf(cc *pgx.ConnConfig) []string {
	hosts := []string{net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port)))}
	for _, f := range cc.Fallbacks {
		if h := net.JoinHostPort(f.Host, strconv.Itoa(int(f.Port))); !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// serverName is user@host:port, or user@host1:port1,host2:port2 for a URL naming several hosts:
// how every line names the server, never with a password.
func serverName(cc *pgx.ConnConfig) string {
	return cc.User + "@" + strings.Join(hostsOf(cc), ",")
}

// reach is which server the Backend reaches and how its lines name it (user@host:port), and,
// where the URL names several hosts, the one its sessions last reached.
type reach struct {
	self, server string
	config       *pgx.ConnConfig // the URL's hosts, and how their names are looked up
	several      bool            // the URL names several hosts: a session names the one it reached
	last         atomic.Pointer[reachedHost]
}

// newReach is the reach of a Backend whose sessions connect as cc says.
func newReach(cc *pgx.ConnConfig) *reach {
	return &reach{self: cc.User, server: serverName(cc), config: cc, several: len(hostsOf(cc)) > 1}
}

// named names the server conn is a session of: the Backend's name where the URL names one
// host, else the address the session reached.
func (r *reach) named(conn *pgconn.PgConn) string {
	if !r.several || conn == nil || conn.Conn() == nil {
		return r.server
	}
	return r.self + "@" + conn.Conn().RemoteAddr().String()
}

// reachedHost is the server a session of the Backend last reached, as the URL names it (host:port)
// and as the session saw it (its remote address).
type reachedHost struct{ named, remote string }

// note remembers which of the URL's hosts conn reached, where the URL names several:
// connections to consumers' databases try it first (first). Left to the URL's order, such a
// connection could meet a standby first that has not replayed the database yet (made a moment
// ago on the primary), and pgx, as libpq, tries no further host on "database does not exist".
func (r *reach) note(ctx context.Context, conn *pgconn.PgConn) {
	if !r.several || conn.Conn() == nil {
		return
	}
	remote := conn.Conn().RemoteAddr().String()
	if w := r.last.Load(); w != nil && w.remote == remote {
		return
	}
	lookup := r.config.LookupFunc
	if lookup == nil {
		lookup = net.DefaultResolver.LookupHost
	}
	for _, h := range hostsOf(r.config) {
		host, port, _ := net.SplitHostPort(h)
		if strings.HasPrefix(host, "/") { // a socket's folder
			if filepath.Join(host, ".s.PGSQL."+port) == remote {
				r.last.Store(&reachedHost{named: h, remote: remote})
				return
			}
			continue
		}
		addrs, err := lookup(ctx, host)
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if net.JoinHostPort(a, port) == remote {
				r.last.Store(&reachedHost{named: h, remote: remote})
				return
			}
		}
	}
}

// first puts the host the Backend's sessions last reached first in cfg's hosts, the others
// after it in the URL's order.
func (r *reach) first(cfg *pgx.ConnConfig) {
	w := r.last.Load()
	if !r.several || w == nil {
		return
	}
	all := append([]*pgconn.FallbackConfig{{Host: cfg.Host, Port: cfg.Port, TLSConfig: cfg.TLSConfig}}, cfg.Fallbacks...)
	slices.SortStableFunc(all, func(x, y *pgconn.FallbackConfig) int {
		return boolOrder(net.JoinHostPort(y.Host, strconv.Itoa(int(y.Port))) == w.named) -
			boolOrder(net.JoinHostPort(x.Host, strconv.Itoa(int(x.Port))) == w.named)
	})
	cfg.Host, cfg.Port, cfg.TLSConfig, cfg.Fallbacks = all[0].Host, all[0].Port, all[0].TLSConfig, all[1:]
}

func boolOrder(v bool) int {
	if v {
		return 1
	}
	return 0
}

// inRecovery is the error of a session of the Backend found in recovery.
func (r *reach) inRecovery(conn *pgconn.PgConn) error { return standby{server: r.named(conn)} }

// validating wraps the URL's own test of a session (target_session_attrs; nil: none) so that
// a host it turns down for being read only or a standby is named by its address. Its other
// answers are passed on as they are: pgx tells prefer-standby's by their type.
func validating(test pgconn.ValidateConnectFunc) pgconn.ValidateConnectFunc {
	if test == nil {
		return nil
	}
	return func(ctx context.Context, conn *pgconn.PgConn) error {
		err := test(ctx, conn)
		if errors.Is(err, pgconn.ErrReadOnlyConnection) || errors.Is(err, pgconn.ErrStandbyConnection) {
			return turnedDown{addr: conn.Conn().RemoteAddr().String(), err: err}
		}
		return err
	}
}

// readOnlySession is what makes a session's every transaction read only, the server enforcing it.
const readOnlySession = "SET default_transaction_read_only = on"

// readOnlyAfter runs after, then makes the session read only. pgconn runs AfterConnect once
// the URL's test (ValidateConnect) has passed: target_session_attrs=read-write tests the
// server's own default, not the provider's choice for this session, which a startup parameter
// would have been. A session SET wins over a database's or a role's setting, as a startup
// parameter does.
func readOnlyAfter(after pgconn.AfterConnectFunc) pgconn.AfterConnectFunc {
	return func(ctx context.Context, conn *pgconn.PgConn) error {
		if after != nil {
			if err := after(ctx, conn); err != nil {
				return err
			}
		}
		if err := conn.Exec(ctx, readOnlySession).Close(); err != nil {
			return fmt.Errorf("make the session read only: %w", err)
		}
		return nil
	}
}

// noPrimary says why a connection found no server it may use where the URL's test turned
// every host it reached down (errors' tree holds turnedDown), "" where it did not.
func noPrimary(err error) string {
	var down, unreachable []string
	var wrongWay bool
	walk(err, func(e error) {
		switch t := e.(type) {
		case turnedDown:
			if !slices.Contains(down, t.addr) {
				down = append(down, t.addr)
			}
		case *net.OpError:
			if t.Addr != nil && !slices.Contains(unreachable, t.Addr.String()) {
				unreachable = append(unreachable, t.Addr.String())
			}
		}
		if e == pgconn.ErrReadWriteConnection || e == pgconn.ErrPrimaryConnection {
			wrongWay = true
		}
	})
	switch {
	case len(down) > 0:
		is := "is a standby (read only)"
		if len(down) > 1 {
			is = "are standbys (read only)"
		}
		text := fmt.Sprintf("has no primary the provider can reach (target_session_attrs): %s %s", strings.Join(down, ", "), is)
		if len(unreachable) > 0 {
			text += fmt.Sprintf(", %s cannot be reached", strings.Join(unreachable, ", "))
		}
		return text
	case wrongWay:
		return "has no standby the provider can reach, which the URL's target_session_attrs asks for: the provider writes, " +
			"and needs a primary (target_session_attrs=read-write or primary)"
	}
	return ""
}

// walk calls fn on err and on every error it wraps, depth first.
func walk(err error, fn func(error)) {
	if err == nil {
		return
	}
	fn(err)
	switch w := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range w.Unwrap() {
			walk(e, fn)
		}
	case interface{ Unwrap() error }:
		walk(w.Unwrap(), fn)
	}
}
