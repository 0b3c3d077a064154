package postgres_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/ports"
)

// TestAVerifyPassOver20000ConsumersRunsNoPBKDF2Twice makes 20,000 roles (whose verifiers use
// one iteration, so that making them is quick) and checks them twice: the second check derives
// no key at all. On a server of its own: the other tests' catalog scans do not meet its roles.
func TestAVerifyPassOver20000ConsumersRunsNoPBKDF2Twice(t *testing.T) {
	is := is.New(t)
	e := newEnvOwn(t)
	const n = 20000
	prefix := name("many")
	verifier := postgres.Verifier("pw", []byte("0123456789abcdef"), 1)
	e.exec("", "SET log_statement = none", fmt.Sprintf(`DO $$ BEGIN FOR i IN 1..%d LOOP
		EXECUTE format('CREATE ROLE %%I LOGIN PASSWORD %%L', '%s_' || i, '%s'); END LOOP; END $$`, n, prefix, verifier))
	t.Cleanup(func() {
		e.exec("", "SET log_statement = none", fmt.Sprintf(`DO $$ BEGIN FOR i IN 1..%d LOOP EXECUTE format('DROP ROLE %%I', '%s_' || i); END LOOP; END $$`, n, prefix))
	})
	ps := make([]ports.Provision, n)
	for i := range ps {
		ps[i] = ports.Provision{As: fmt.Sprintf("%s_%d", prefix, i+1), Password: "pw", Values: map[string]any{}, Derived: map[string]any{}}
	}
	b := e.backend(e.srv.URL)
	first := b.HoldsAll(ctx, ps, time.Minute)
	for _, a := range first {
		is.NoErr(a.Err)
		is.Equal(a.Drift, []string{"not recorded as the provider's", "database missing"}) // the password verified, no database made
	}
	is.Equal(b.Derivations(), n) // each verified once
	second := b.HoldsAll(ctx, ps, time.Minute)
	is.Equal(len(second), n)
	is.Equal(b.Derivations(), n) // and not again: no PBKDF2 at all
}

// TestAChecksDeadlineStartsWhenItStarts: a database check that waits for a slot longer than its
// deadline is still made, and answered, once it has one (issue 19: 73 of 120 consumers were
// never checked because their deadlines ran out while they waited their turn).
func TestAChecksDeadlineStartsWhenItStarts(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	if !e.available("pg_trgm") {
		t.Skip("pg_trgm is not available on this server")
	}
	ps := []ports.Provision{provision(name("turn"), "pg_trgm"), provision(name("turn"), "pg_trgm")}
	for _, p := range ps {
		e.mustCreate(p)
	}
	const each = 2 * time.Second // long enough to connect on a loaded machine, short against the wait below
	give := e.b.TakeSlots()      // every slot busy, as with eight creates at once
	answers := make(chan []ports.Checked, 1)
	go func() { answers <- e.b.HoldsAll(ctx, ps, each) }()
	time.Sleep(2 * each) // the checks wait their turn for longer than their deadline
	give()
	select {
	case got := <-answers:
		for _, a := range got {
			is.NoErr(a.Err) // made, not timed out while waiting
			is.True(a.Held) // and answered
		}
	case <-time.After(time.Minute):
		t.Fatal("HoldsAll did not return")
	}
}

// A batch of checks tells its trace as its answers come, the catalog's at once and each check
// inside a database as it returns, and every consumer once by the batch's end (issue 39: the
// progress stood at "checking: 0 of 1,000" through a minute of checks inside databases).
func TestHoldsAllTellsItsTraceEachAnswerAsItComes(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	if !e.available("pg_trgm") {
		t.Skip("pg_trgm is not available on this server")
	}
	inside := []ports.Provision{provision(name("trace"), "pg_trgm"), provision(name("trace"), "pg_trgm")}
	for _, p := range inside {
		e.mustCreate(p)
	}
	ps := append(inside, provision(name("trace")), ports.Provision{As: `bad"name`}) // never made; refused
	var mu sync.Mutex
	var told []int
	traced := ports.WithCheckTrace(ctx, &ports.CheckTrace{Answered: func(n int) {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, n)
	}})
	answers := e.b.HoldsAll(traced, ps, time.Minute)
	is.True(answers[0].Held && answers[1].Held)
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, n := range told {
		total += n
	}
	is.Equal(total, len(ps)) // each once
	is.True(len(told) >= 3)  // the catalog's answer, then each inside check as it returned
}
