package tests

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/tests/pgserver"
)

// TestAFileRewrittenInPlaceUnderTheLoopWithdrawsNothing runs a writer that rewrites the
// contributions file in place (same inode, truncated and written in pieces, as a careless
// writer or rsync --inplace does) again and again while the daemon passes, each state listing
// only part of the consumers, and ends with the whole list: no consumer is ever withdrawn.
func TestAFileRewrittenInPlaceUnderTheLoopWithdrawsNothing(t *testing.T) {
	is := is.New(t)
	url := pgserver.Shared(t).URL
	m := newMesh(t)
	cs := consumers("inplace", 40)
	m.give(cs...)
	full, err := os.ReadFile(m.file)
	is.NoErr(err)
	p := start(t, nil, daemonArgs(m, url, "--withdraw-settle", "2s", "--every", "50ms")...)
	eventually(t, "all 40 log in", func() bool { return p.metric(`provisioner_consumers{state="applied"}`) == 40 })

	// The states between two writes: valid JSON, listing 20 to 39 of the 40.
	var entries []map[string]any
	var doc map[string]any
	is.NoErr(json.Unmarshal(full, &doc))
	for _, e := range doc["given"].([]any) {
		entries = append(entries, e.(map[string]any))
	}
	partial := func() []byte {
		n := 20 + rand.IntN(20)
		raw, _ := json.Marshal(map[string]any{"requirement": m.resource, "given": entries[:n]})
		return raw
	}
	write := func(raw []byte) {
		f, err := os.OpenFile(m.file, os.O_WRONLY|os.O_TRUNC, 0)
		is.NoErr(err)
		for len(raw) > 0 { // in pieces, as a writer streaming it does
			n := min(len(raw), 512)
			_, err = f.Write(raw[:n])
			is.NoErr(err)
			raw = raw[n:]
		}
		is.NoErr(f.Close())
	}
	passes := p.metric(`provisioner_passes_total`)
	deadline := time.Now().Add(6 * time.Second) // three settle periods of rewriting
	for time.Now().Before(deadline) {
		write(partial())
		time.Sleep(100 * time.Millisecond) // the writer's pace: each state lasts less than the settle
	}
	write(full)
	is.True(p.metric(`provisioner_passes_total`) > passes+20) // passes ran while it wrote
	p.passes(5)
	is.Equal(p.count("withdrawing"), 0) // none withdrawn: the final file lists them all
	is.Equal(p.metric(`provisioner_withdrawals_total`), 0.0)
	for _, c := range cs {
		is.True(c.logsIn(t, url))
	}
}

func TestDropAfterTheDelayKeepsTheDataUntilThen(t *testing.T) {
	is := is.New(t)
	url := pgserver.Shared(t).URL
	m := newMesh(t)
	back := consumer{as: name("back"), password: randomHex(8)}
	gone := consumer{as: name("gone"), password: randomHex(8)}
	m.give(back, gone)
	p := start(t, nil, daemonArgs(m, url, "--on-withdraw", "drop", "--drop-after", "3s")...)
	eventually(t, "both log in", func() bool { return back.logsIn(t, url) && gone.logsIn(t, url) })
	is.NoErr(query(t, url, back.as, "CREATE TABLE notes AS SELECT 1 AS x"))

	m.give()
	eventually(t, "both lose their login", func() bool { return !back.logsIn(t, url) && !gone.logsIn(t, url) })
	exists, _ := roleLeft(t, url, gone.as)
	is.True(exists) // not dropped yet: only the login went
	m.give(back)    // back comes back within the delay
	eventually(t, "back logs in again", func() bool { return back.logsIn(t, url) })
	var rows int
	is.NoErr(query(t, url, back.as, "SELECT count(*) FROM notes", &rows))
	is.Equal(rows, 1) // with its data
	eventually(t, "gone dropped after the delay", func() bool { exists, _ := roleLeft(t, url, gone.as); return !exists })
	is.Equal(p.count(gone.as+": withdrawn "), 1) // said when dropped
	exists, _ = roleLeft(t, url, back.as)
	is.True(exists)
}

func TestAMassWithdrawalIsHeldAndCounted(t *testing.T) {
	is := is.New(t)
	url := pgserver.Shared(t).URL
	m := newMesh(t)
	cs := consumers("mass", 8)
	m.give(cs...)
	p := start(t, nil, daemonArgs(m, url, "--withdraw-settle", "1s")...)
	eventually(t, "all log in", func() bool { return p.metric(`provisioner_consumers{state="applied"}`) == 8 })
	m.give(cs[:2]...)
	eventually(t, "the mass withdrawal held, and said", func() bool {
		return p.metric(`provisioner_withdrawals_held`) == 6 && p.count("WITHDRAWAL HELD: ") == 1
	})
	is.Equal(p.metric(`provisioner_mass_withdrawal`), 1.0)
	is.True(cs[7].logsIn(t, url)) // still there while held
	eventually(t, "withdrawn after six times the settle", func() bool { return !cs[7].logsIn(t, url) })
	is.Equal(p.count("WITHDRAWAL HELD: "), 1) // said once
	eventually(t, "nothing held", func() bool { return p.metric(`provisioner_withdrawals_held`) == 0 })
}

func TestAFIFOSecretBlocksNothing(t *testing.T) {
	is := is.New(t)
	url := pgserver.Shared(t).URL
	m := newMesh(t)
	fifo := consumer{as: name("fifo"), password: randomHex(8)}
	ok := consumer{as: name("ok"), password: randomHex(8)}
	m.give(fifo, ok)
	m.remove(m.secret(fifo.as))
	is.NoErr(syscall.Mkfifo(m.secret(fifo.as), 0o600)) // a FIFO nobody writes
	p := start(t, nil, daemonArgs(m, url)...)
	eventually(t, "the other consumer converges", func() bool { return ok.logsIn(t, url) })
	eventually(t, "the FIFO said", func() bool {
		return p.count(fifo.as+": secret not readable yet") >= 1 && strings.Contains(p.stderr.String(), "is not a regular file but a named pipe")
	})
	is.Equal(p.stop(), 0) // and SIGTERM stops it
}
