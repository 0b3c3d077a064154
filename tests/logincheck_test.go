package tests

import (
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/tests/pgserver"
)

// loginStatus is each consumer's last check and last login check, by login, as /status says.
func loginStatus(t *testing.T, p *proc) map[string][2]time.Time {
	t.Helper()
	var doc struct {
		Consumers []struct {
			As             string    `json:"as"`
			CheckedAt      time.Time `json:"checked_at"`
			LoginCheckedAt time.Time `json:"login_checked_at"`
		} `json:"consumers"`
	}
	if err := p.status(&doc); err != nil {
		t.Fatal(err)
	}
	out := map[string][2]time.Time{}
	for _, c := range doc.Consumers {
		out[c.As] = [2]time.Time{c.CheckedAt, c.LoginCheckedAt}
	}
	return out
}

// In delegated mode the password is checked by a login on a budget of its own: every consumer
// is checked every --verify-every, logged in as only every --login-check-every, and a password
// changed behind the provider's back is found by the consumer's next login check and repaired,
// within that interval.
func TestDelegatedLoginCheckFindsAPasswordChangedBehindItsBack(t *testing.T) {
	is := is.New(t)
	srv := pgserver.Shared(t)
	m := newMesh(t)
	var all []consumer
	for range 4 {
		all = append(all, consumer{as: name("lc"), password: randomHex(8)})
	}
	m.give(all...)
	const every = 6 * time.Second
	p := start(t, nil, daemonArgs(m, delegatedURL(t, srv.URL), "--login-check-every", every.String(), "--login-rate", "2")...)
	for _, c := range all {
		eventually(t, c.as+" logs in", func() bool { return c.logsIn(t, srv.URL) })
	}
	eventually(t, "every consumer login-checked once", func() bool {
		s := loginStatus(t, p)
		for _, c := range all {
			if s[c.as][1].IsZero() {
				return false
			}
		}
		return true
	})

	// Checked every second, logged in as at most once or twice in the interval. A login falls
	// due within the interval and is made at the verify pass after that (a second later, and
	// the pass's own time): the watch lasts the interval and that much more, so that a due
	// login made a little late is not counted as none.
	watch := every + 3*time.Second
	before := loginStatus(t, p)
	checks, logins := map[string]int{}, map[string]int{}
	last := before
	for end := time.Now().Add(watch); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		now := loginStatus(t, p)
		for _, c := range all {
			if !now[c.as][0].Equal(last[c.as][0]) {
				checks[c.as]++
			}
			if !now[c.as][1].Equal(last[c.as][1]) {
				logins[c.as]++
			}
		}
		last = now
	}
	for _, c := range all {
		t.Logf("%s: %d checks, %d login checks in %s", c.as, checks[c.as], logins[c.as], watch)
		is.True(checks[c.as] >= 3)                                // every verify pass checks it
		is.True(logins[c.as] >= 1 && logins[c.as] < checks[c.as]) // logged in as within the interval, not at every check
	}

	letta := all[2]
	is.NoErr(query(t, srv.URL, "", "ALTER ROLE "+letta.as+" PASSWORD 'behind-its-back'"))
	changed := time.Now()
	eventually(t, "the password drift found by its login check, and repaired", func() bool {
		return p.count(letta.as+": what drifted: password") == 1 && letta.logsIn(t, srv.URL)
	})
	found := time.Since(changed)
	t.Logf("found and repaired %s after the change (--login-check-every %s)", found.Round(10*time.Millisecond), every)
	is.True(found < every+2*time.Second) // within the interval (and the pass that repairs it)
	is.Equal(p.count(letta.as+": repaired (password)"), 1)
	for _, c := range all {
		if c.as != letta.as {
			is.Equal(p.count(c.as+": what drifted"), 0) // the others untouched
		}
	}
}
