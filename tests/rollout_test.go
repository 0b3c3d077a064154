package tests

import (
	"strings"
	"syscall"
	"testing"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/tests/pgserver"
)

// giveWith replaces the contributions file with cs, each naming the extensions entries (a name,
// or {"name", "version"}).
func (m *mesh) giveWith(extensions []any, cs ...consumer) {
	m.t.Helper()
	entries := make([]map[string]any, len(cs))
	for i, c := range cs {
		entries[i] = m.entry(c, extensions, nil)
	}
	m.giveEntries(cs, entries...)
}

func versionIn(t *testing.T, url, db, ext string) string {
	var v string
	_ = query(t, url, db, "SELECT extversion::text FROM pg_extension WHERE extname = '"+ext+"'", &v)
	return v
}

// 20 consumers at 1.1 of an extension whose 1.1 -> 1.2 script fails: the canary's update fails,
// the rollout halts for all 20 (said once at ERROR, shown by /status and the metric), each keeps
// 1.1; the script fixed and SIGHUP resume it: the canary first, the rest after a short soak.
func TestAFailedUpdateHaltsTheRolloutForAllAndSIGHUPResumesIt(t *testing.T) {
	is := is.New(t)
	srv := pgserver.Shared(t)
	ext := "novox_roll_" + randomHex(3)
	srv.InstallExtension(t, pgserver.ThreeVersions(ext, true))
	m := newMesh(t)
	cs := consumers("roll", 20)
	m.giveWith([]any{map[string]any{"name": ext, "version": "1.1"}}, cs...)
	p := start(t, nil, daemonArgs(m, srv.URL, "--extension-soak", "3s", "--parallel", "4")...)
	eventually(t, "all 20 at 1.1", func() bool {
		for _, c := range cs {
			if versionIn(t, srv.URL, c.as, ext) != "1.1" {
				return false
			}
		}
		return true
	})

	m.giveWith([]any{ext}, cs...) // the pin let go: the server's default, 1.2, is wanted
	eventually(t, "halted", func() bool { return p.metric(`provisioner_extension_rollouts_halted`) == 1 })
	p.passes(8)                                                                             // verify passes (every 1 s) among them
	is.Equal(p.count("rollout of extension "+ext+" -> 1.2 halted for every consumer: "), 1) // said once
	is.Equal(p.count("update "+ext+" 1.1 -> 1.2 failed: division by zero"), 1)              // naming the versions and the reason
	for _, c := range cs {
		is.Equal(versionIn(t, srv.URL, c.as, ext), "1.1") // each keeps 1.1
	}
	var doc struct {
		Rollouts []struct {
			Subject, From, To, Halted string
			Done, Total               int
		}
	}
	is.NoErr(p.status(&doc))
	is.Equal(len(doc.Rollouts), 1) // /status shows the rollout
	r := doc.Rollouts[0]
	is.Equal([]any{r.Subject, r.From, r.To, r.Done, r.Total}, []any{"extension " + ext, "1.1", "1.2", 0, 20})
	is.True(strings.Contains(r.Halted, "division by zero")) // halted, and why

	srv.InstallExtension(t, pgserver.ThreeVersions(ext, false)) // the script fixed
	is.NoErr(p.g.Signal(syscall.SIGHUP))
	eventually(t, "the rest followed", func() bool {
		for _, c := range cs {
			if versionIn(t, srv.URL, c.as, ext) != "1.2" {
				return false
			}
		}
		return true
	})
	// A pass's lines are said once it is settled, after the last of its updates is on the server.
	eventually(t, "an audit line per update", func() bool { return p.count("extension "+ext+" updated 1.1 -> 1.2") >= 20 })
	is.Equal(p.count("extension "+ext+" updated 1.1 -> 1.2"), 20) // an audit line per update, and no more
	is.Equal(p.count("the canaries ("), 1)                        // the soak's end, said once
	// The canary first, then the soak's end, then the rest: in the order said.
	said := p.stderr.String()
	soaked := strings.Index(said, "rollout of extension "+ext+" -> 1.2: the canaries ("+cs[0].as+") held it for 3s; the rest follow")
	is.True(soaked > 0)
	is.True(strings.Index(said, cs[0].as+": extension "+ext+" updated 1.1 -> 1.2") < soaked) // the canary before
	for _, c := range cs[1:] {
		is.True(strings.Index(said, c.as+": extension "+ext+" updated 1.1 -> 1.2") > soaked) // each other after
	}
	eventually(t, "the rollout over", func() bool { return p.metric(`provisioner_extension_rollouts_halted`) == 0 })
	is.Equal(p.stop(), 0)
}

// Delegated, on the server that allow-lists pg_trgm (pgextwlist): a consumer's pg_trgm created
// at 1.4 is updated to the server's default by the provider that is not a superuser.
func TestDelegatedUpdatesAnAllowListedExtension(t *testing.T) {
	srv := pgserver.AllowListing(t)
	m := newMesh(t)
	letta := consumer{as: name("letta"), password: randomHex(8)}
	m.giveWith([]any{map[string]any{"name": "pg_trgm", "version": "1.4"}}, letta)
	p := start(t, nil, daemonArgs(m, delegatedURL(t, srv.URL), "--extension-soak", "1s")...)
	eventually(t, "pg_trgm at 1.4", func() bool { return versionIn(t, srv.URL, letta.as, "pg_trgm") == "1.4" })
	var def string
	is.New(t).NoErr(query(t, srv.URL, "", "SELECT default_version::text FROM pg_available_extensions WHERE name = 'pg_trgm'", &def))
	m.giveWith([]any{"pg_trgm"}, letta)
	eventually(t, "pg_trgm updated", func() bool { return versionIn(t, srv.URL, letta.as, "pg_trgm") == def })
	eventually(t, "said", func() bool { return p.count(letta.as+": extension pg_trgm updated 1.4 -> "+def) == 1 })
	is.New(t).Equal(p.stop(), 0)
}
