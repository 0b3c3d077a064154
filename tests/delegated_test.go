package tests

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/novox/postgres-provider/tests/pgserver"
)

// delegatedURL makes, on the server whose superuser's URL is super, a provider's role that may
// create roles and databases and is not a superuser, as the admin of a managed server is, and
// answers its URL.
func delegatedURL(t *testing.T, super string) string {
	t.Helper()
	is := is.New(t)
	prov := name("prov")
	is.NoErr(query(t, super, "", "CREATE ROLE "+prov+" LOGIN CREATEROLE CREATEDB PASSWORD 'prov-pw'"))
	is.NoErr(query(t, super, "", "ALTER ROLE "+prov+" SET log_parameter_max_length = 0")) // the test server logs every statement
	return urlAs(t, super, prov, "prov-pw")
}

// urlAs is the URL super names, logging in as user with password.
func urlAs(t *testing.T, super, user, password string) string {
	t.Helper()
	u, err := url.Parse(super)
	is.New(t).NoErr(err)
	u.User = url.UserPassword(user, password)
	return u.String()
}

// hasExtension is whether db has the extension ext.
func hasExtension(t *testing.T, super, db, ext string) bool {
	var n int
	return query(t, super, db, "SELECT count(*) FROM pg_extension WHERE extname = '"+ext+"'", &n) == nil && n == 1
}

// Letta, on a server that allow-lists vector and pg_trgm for the admin role (pgextwlist, as
// RDS, Cloud SQL and Azure do), under a provider that is not a superuser: it gets both, dblink
// (not allow-listed) is said once and is absent, so letta is incomplete, and the rest of it is
// made and withdrawn.
func TestLettaRunsDelegatedWithTheExtensionsThePlatformAllowLists(t *testing.T) {
	is := is.New(t)
	srv := pgserver.AllowListing(t)
	m := newMesh(t)
	letta := consumer{as: name("letta"), password: randomHex(8), extensions: []string{"vector", "pg_trgm", "dblink"}}
	m.give(letta)
	p := start(t, nil, daemonArgs(m, delegatedURL(t, srv.URL))...)
	eventually(t, "letta logs in", func() bool { return letta.logsIn(t, srv.URL) })
	eventually(t, "letta has vector and pg_trgm", func() bool {
		return hasExtension(t, srv.URL, letta.as, "vector") && hasExtension(t, srv.URL, letta.as, "pg_trgm")
	})
	eventually(t, "dblink refused, said", func() bool {
		return p.count(letta.as+": extension dblink is refused by the server") == 1
	})
	// Made whole but for dblink, which the platform refuses: incomplete, never applied.
	eventually(t, "incomplete", func() bool { return p.metric(`provisioner_consumers{state="incomplete"}`) == 1 })
	is.Equal(p.metric(`provisioner_consumers{state="applied"}`), 0.0)
	is.Equal(p.metric(`provisioner_mode{role="delegated"}`), 1.0)
	is.NoErr(query(t, srv.URL, letta.as, "SELECT 1")) // its database
	as := urlAs(t, srv.URL, letta.as, letta.password)
	is.NoErr(query(t, as, letta.as, "CREATE TABLE memories (id int PRIMARY KEY, embedding vector, note text)")) // letta uses vector
	is.NoErr(query(t, as, letta.as, "SELECT similarity('vector', 'vectors')"))                                  // and pg_trgm
	p.passes(10)                                                                                                // verify passes (every 1 s) among them
	is.True(!hasExtension(t, srv.URL, letta.as, "dblink"))                                                      // absent
	is.Equal(p.count("extension dblink is refused"), 1)                                                         // said once, not per pass
	is.Equal(p.count("what drifted"), 0)                                                                        // and not taken for drift

	m.give()
	eventually(t, "letta withdrawn", func() bool { return !letta.logsIn(t, srv.URL) })
	is.True(hasExtension(t, srv.URL, letta.as, "vector")) // its database kept
	is.Equal(p.stop(), 0)
}

// A consumer at its connection limit cannot be logged in as, so a provider that is not a
// superuser cannot check its password: "could not check", said once, never taken for drift nor
// repaired; checked again once a connection is free.
func TestDelegatedSaysOnceThatAConsumerAtItsConnectionLimitCouldNotBeChecked(t *testing.T) {
	is := is.New(t)
	srv := pgserver.Shared(t)
	m := newMesh(t)
	letta := consumer{as: name("letta"), password: randomHex(8)}
	m.give(letta)
	p := start(t, nil, daemonArgs(m, delegatedURL(t, srv.URL), "--connection-limit", "1", "--login-check-every", "3s")...)
	eventually(t, "letta logs in", func() bool { return letta.logsIn(t, srv.URL) })
	eventually(t, "applied", func() bool { return p.metric(`provisioner_consumers{state="applied"}`) == 1 })
	creates, reapplies := p.metric(`provisioner_creates_total`), p.metric(`provisioner_reapplies_total`)

	// The one connection letta may have; the provider's own login check holds it for a moment
	// every 3 s, so it is taken once free.
	var busy *pgx.Conn
	eventually(t, "letta's one connection taken", func() bool {
		c, err := connect(ctx, urlAs(t, srv.URL, letta.as, letta.password), "", "", letta.as)
		if err == nil {
			busy = c
		}
		return err == nil
	})
	defer busy.Close(ctx)
	eventually(t, "could not check, said", func() bool {
		return p.count(letta.as+": could not check the backend") == 1
	})
	is.True(strings.Contains(p.stderr.String(), "too many connections for role")) // the server's reason
	p.passes(15)                                                                  // three verify passes (every 1 s) and more
	is.Equal(p.count(letta.as+": could not check the backend"), 1)                // said once
	is.Equal(p.count("what drifted"), 0)                                          // not drift
	is.Equal(p.metric(`provisioner_creates_total`), creates)                      // and nothing repaired
	is.Equal(p.metric(`provisioner_reapplies_total`), reapplies)
	_, err := busy.Exec(ctx, "SELECT 1")
	is.NoErr(err) // letta's own session untouched

	pid := busy.PgConn().PID()
	is.NoErr(busy.Close(ctx))
	eventually(t, "letta's connection gone", func() bool {
		var n int
		return query(t, srv.URL, "", fmt.Sprintf("SELECT count(*) FROM pg_stat_activity WHERE pid = %d", pid), &n) == nil && n == 0
	})
	p.passes(1) // a check under way while it went has settled
	before := p.metric(`provisioner_holds_errors_total`)
	p.passes(10)
	is.Equal(p.metric(`provisioner_holds_errors_total`), before) // checked again, and answered
	is.Equal(p.metric(`provisioner_consumers{state="applied"}`), 1.0)
}

// Removed from the file with --on-withdraw drop, a consumer of a provider that is not a
// superuser goes, role, database and all, its sessions ended where the provider may end them.
func TestDelegatedConsumerRemovedWithDropLeavesNothing(t *testing.T) {
	is := is.New(t)
	srv := pgserver.Shared(t)
	m := newMesh(t)
	letta := consumer{as: name("letta"), password: randomHex(8), extensions: []string{"pg_trgm"}}
	m.give(letta)
	p := start(t, nil, daemonArgs(m, delegatedURL(t, srv.URL), "--on-withdraw", "drop", "--drop-after", "0")...)
	eventually(t, "letta logs in", func() bool { return letta.logsIn(t, srv.URL) })
	eventually(t, "letta has pg_trgm", func() bool { return hasExtension(t, srv.URL, letta.as, "pg_trgm") })
	m.give()
	eventually(t, "role and database gone", func() bool {
		var left int
		err := query(t, srv.URL, "", fmt.Sprintf(`SELECT (SELECT count(*) FROM pg_roles WHERE rolname = '%[1]s')
			+ (SELECT count(*) FROM pg_database WHERE datname = '%[1]s')`, letta.as), &left)
		return err == nil && left == 0
	})
	eventually(t, "dropped", func() bool { return p.metric(`provisioner_drops_total`) == 1 })
	is.Equal(p.metric(`provisioner_failures_total`), 0.0) // at the first attempt
	is.Equal(p.stop(), 0)
}
