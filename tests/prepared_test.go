package tests

import (
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/tests/pgserver"
)

// TestASuperusersPreparedTransactionMakesTheProviderNotReady: a superuser's prepared transaction
// holds a consumer's lock. It is nobody's to undo but an operator's: the provider says it, is
// not ready while it lasts, and makes the consumer once it is gone.
func TestASuperusersPreparedTransactionMakesTheProviderNotReady(t *testing.T) {
	is := is.New(t)
	srv := pgserver.Shared(t)
	var allowed int
	is.NoErr(query(t, srv.URL, "", "SELECT current_setting('max_prepared_transactions')::int", &allowed))
	if allowed == 0 {
		t.Skip("the server allows no prepared transactions (max_prepared_transactions = 0)")
	}
	m := newMesh(t)
	c := consumer{as: name("px"), password: randomHex(8)}
	gid := name("gid")
	is.NoErr(query(t, srv.URL, "", "BEGIN; SELECT pg_advisory_xact_lock(hashtextextended('novox-provisioner/"+c.as+"', 0)); "+
		"PREPARE TRANSACTION '"+gid+"'"))
	rollback := func() error { return query(t, srv.URL, "", "ROLLBACK PREPARED '"+gid+"'") }
	t.Cleanup(func() { _ = rollback() })

	m.give(c)
	p := start(t, nil, daemonArgs(m, srv.URL)...)
	said := `prepared transaction "` + gid + `" of the superuser `
	eventually(t, "said", func() bool { return p.count(said) == 1 })
	eventually(t, "not ready", func() bool {
		code, body := p.get("/readyz")
		return code == 503 && strings.Contains(body, said)
	})
	is.True(!c.logsIn(t, srv.URL))

	is.NoErr(rollback()) // the operator ends it
	eventually(t, "the consumer logs in", func() bool { return c.logsIn(t, srv.URL) })
	eventually(t, "ready", func() bool { code, _ := p.get("/readyz"); return code == 200 })
	is.Equal(p.count(said), 1) // said once
}
