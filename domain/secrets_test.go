package domain_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/matryer/is"

	"github.com/novox/postgres-provider/adapters/files"
	"github.com/novox/postgres-provider/domain"
)

func TestASecretThatIsAFIFOIsRefusedWithoutBlocking(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	is.NoErr(syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600)) // a FIFO nobody writes
	is.NoErr(os.WriteFile(filepath.Join(dir, "ok"), []byte("pw\n"), 0o600))
	file := filepath.Join(dir, "contributions.json")
	is.NoErr(os.WriteFile(file, []byte(fmt.Sprintf(`{"given": [%s, %s]}`,
		mustJSON(t, consumer("fifo", filepath.Join(dir, "fifo"))), mustJSON(t, consumer("ok", filepath.Join(dir, "ok"))))), 0o600))
	backend, log := &fakeBackend{}, &fakeLogger{}
	h := domain.New(domain.Config{Resource: "postgres", Receives: file}, files.New(), clock.NewMock(), backend, nil, log)
	r := h.Reconcile(ctx)                            // returns: nothing blocks on the FIFO
	is.Equal(r.Consumers["ok"], domain.StateApplied) // the other consumer converges
	is.Equal(r.Consumers["fifo"], domain.StateWaitingForSecret)
	is.Equal(log.lines(), []string{fmt.Sprintf("fifo: secret not readable yet (%[1]s): %[1]s is not a regular file but a named pipe",
		filepath.Join(dir, "fifo"))}) // said like any unreadable file

	is.NoErr(os.Remove(file))
	is.NoErr(syscall.Mkfifo(file, 0o600)) // the contributions file itself
	r = h.Reconcile(ctx)
	is.True(!r.FileRead)
	is.Equal(log.lines()[1], fmt.Sprintf("contributions file unreadable (%[1]s): %[1]s is not a regular file but a named pipe; "+
		"nothing applied or removed until it can be read", file))
}

func TestSecretsThatCannotBePasswordsAreRefused(t *testing.T) {
	for _, c := range []struct {
		name, secret, says string
	}{
		{"a NUL byte", "pass\x00word", "it holds a NUL byte, which no client can send in a password"},
		{"over 1 KiB", strings.Repeat("p", 1025), "it holds more than 1024 bytes, which is not a password"},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			w := newWorld(t)
			w.write("/s/a", c.secret)
			w.write("/s/b", "pw")
			w.contributions(consumer("a", "/s/a"), consumer("b", "/s/b"))
			for range 3 {
				r := w.pass(time.Second)
				is.Equal(r.Consumers["a"], domain.StateFailing) // refused
				is.Equal(r.Consumers["b"], domain.StateApplied) // and the others go on
				is.Equal(r.Status[0].LastError, "a: secret refused (/s/a): "+c.says+
					"; nothing is provisioned for this consumer until it holds a password") // on /status
			}
			is.Equal(w.backend.createsOf("a"), 0)
			is.Equal(w.log.take(), []string{"a: secret refused (/s/a): " + c.says +
				"; nothing is provisioned for this consumer until it holds a password"}) // said once
			w.write("/s/a", strings.Repeat("p", 1024)+"\n") // 1 KiB and its newline is a password
			w.pass(time.Second)
			is.Equal(w.backend.createsOf("a"), 1)
		})
	}
}

func TestAnEmptySecretIsNotWrittenYet(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/a", "\n")
	w.contributions(consumer("a", "/s/a"))
	r := w.pass(0)
	is.Equal(r.Consumers["a"], domain.StateWaitingForSecret) // the host may have made it and not filled it yet
	is.Equal(w.log.take(), []string{"a: secret not readable yet (/s/a): it is empty"})
}

func TestScrubbingTouchesErrorsNotTheLoopsWords(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/x5/secrets/letta", "letta")
	w.contributions(consumer("letta", "/x5/secrets/letta"), consumer("other", "/x5/secrets/other"))
	w.backend.createErr = map[string]error{"letta": errors.New("boom: letta")}
	w.pass(0)
	is.Equal(w.log.take(), []string{
		"letta: create failed, will retry: boom: ***",                                                     // the error scrubbed
		"other: secret not readable yet (/x5/secrets/other): open /x5/secrets/other: file does not exist", // the login and the path not
	})
	w.write("/x5/secrets/other", "e")
	w.backend.createErr = map[string]error{"other": errors.New("the role e said e")}
	w.pass(0)
	is.Equal(w.log.take(), []string{"letta: created, after 1 failed attempt(s)",
		"other: create failed, will retry: th*** rol*** *** said ***"}) // the words of the loop intact, the error's scrubbed once
}

func TestALoginListedThreeTimesIsSaidOnce(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	w.write("/s/one", "one")
	w.contributions(consumer("letta", "/s/one"), consumer("letta", "/s/two"), consumer("letta", "/s/three"))
	w.pass(0)
	is.Equal(w.log.take(), []string{"letta: listed more than once in " + receives + "; using the first entry"})
}

// TestParallelSaysWhatSequentialSays runs one scenario with one backend call at a time and with
// eight, and compares what was said and what the backend was asked.
func TestParallelSaysWhatSequentialSays(t *testing.T) {
	run := func(parallel int) ([]string, int, int) {
		w := newWorld(t)
		w.configure(domain.Config{Parallel: parallel})
		var entries []entry
		for i := range 40 {
			as := fmt.Sprintf("c%02d", i)
			if i%7 != 3 {
				w.write("/s/"+as, "pw-"+as)
			}
			entries = append(entries, consumer(as, "/s/"+as))
		}
		w.backend.createErr = map[string]error{"c05": errors.New("no"), "c11": errors.New("no")}
		w.contributions(entries...)
		w.pass(0)
		for i := range 40 {
			if i%5 == 0 {
				w.backend.lose(fmt.Sprintf("c%02d", i))
			}
		}
		w.pass(time.Minute)
		w.contributions(entries[10:]...)
		w.pass(0)
		w.pass(settle)
		return w.log.lines(), len(w.backend.creates), len(w.backend.removes)
	}
	is := is.New(t)
	seqLines, seqCreates, seqRemoves := run(1)
	parLines, parCreates, parRemoves := run(8)
	is.Equal(parLines, seqLines) // the same lines, in the same order
	is.Equal(parCreates, seqCreates)
	is.Equal(parRemoves, seqRemoves)
	is.True(seqRemoves > 0 && seqCreates > 40) // and the scenario did withdraw and repair
}

// writing is a filesystem on which a writer rewrites the contributions file while the loop is
// reading it: between the loop's open and its look afterwards.
type writing struct {
	*changingFs
	w       *world
	content string
	armed   bool
	looks   int // stats of the file let pass once armed, before the one that writes
}

func (f *writing) Stat(name string) (os.FileInfo, error) {
	if f.armed && name == receives {
		if f.looks > 0 {
			f.looks--
			return f.changingFs.Stat(name)
		}
		f.armed = false
		f.w.write(receives, f.content)
	}
	return f.changingFs.Stat(name)
}

func TestAFileThatChangesWhileItIsReadIsNotUsed(t *testing.T) {
	is := is.New(t)
	w := twoApplied(t)
	fs := &writing{changingFs: w.fs, w: w}
	w.h = domain.New(domain.Config{Resource: "postgres", Receives: receives}, fs, w.clk, w.backend, nil, w.log)
	w.pass(0)
	w.log.take()
	w.contributions(consumer("a", "/s/a")) // what was read: b gone
	// Written after the loop's first look (sameFile) and its read, before the look after it.
	fs.content, fs.armed, fs.looks = mustJSON(t, map[string]any{"given": []any{consumer("a", "/s/a"), consumer("b", "/s/b")}}), true, 1
	r := w.pass(settle)
	is.True(!r.FileRead) // not used
	is.Equal(w.log.take(), []string{"contributions file unreadable (" + receives + "): it changed while it was read; " +
		"nothing applied or removed until it can be read"}) // said once
	for range 3 {
		w.pass(settle)
	}
	is.Equal(len(w.backend.removes), 0) // the file as the writer left it lists b
	is.Equal(w.log.take(), []string{"contributions file readable again"})
}

func TestAnUnchangedSecretIsNotReadAgain(t *testing.T) {
	is := is.New(t)
	w := newApplied(t)
	opened := w.fs.opened("/s/letta")
	for range 3 {
		w.pass(domain.DefaultEvery)
	}
	is.Equal(w.fs.opened("/s/letta"), opened) // one stat a pass, no read
}

// The contributions file as it was when last read (one stat: inode, size, times, change time)
// is not opened again, not even for its digest; rewritten in place, it is.
func TestAnUnchangedFileIsNotReadAgain(t *testing.T) {
	is := is.New(t)
	w := newApplied(t)
	opened := w.fs.opened(receives)
	for range 3 {
		w.pass(domain.DefaultEvery)
	}
	is.Equal(w.fs.opened(receives), opened) // one stat a pass
	w.contributions(consumer("letta", "/s/letta"), consumer("other", "/s/other"))
	w.write("/s/other", "pw")
	r := w.pass(domain.DefaultEvery)
	is.True(w.fs.opened(receives) > opened) // read again
	is.Equal(r.Consumers["other"], domain.StateApplied)
}

func TestASecretRewrittenToTheSameSizeAndTimeIsSeen(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	written := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	w.write("/s/letta", "pw-1")
	is.NoErr(w.fs.Chtimes("/s/letta", written, written))
	w.contributions(consumer("letta", "/s/letta"))
	w.pass(0)
	w.write("/s/letta", "pw-2") // the same size
	is.NoErr(w.fs.Chtimes("/s/letta", written, written))
	w.pass(domain.DefaultEvery)
	is.Equal(w.backend.lastCreate().Password, "pw-2") // the new password was applied: only the change time told
}

// Secrets whose folder is missing are one reason: one line naming the folder and how many,
// then, once it is no race any more, one loud line; not a line per consumer per pass (100,000
// consumers said 1.3 million lines in 40 s). A consumer whose own secret is missing in a
// folder that exists keeps the spec's lines.
func TestSecretsWhoseFolderIsMissingAreOneLine(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	var entries []entry
	for i := range 1000 {
		as := fmt.Sprint("m", i)
		entries = append(entries, consumer(as, "/run/mesh/secrets/"+as+"/password")) // a folder each, in one missing
	}
	w.write("/s/ok", "pw")
	entries = append(entries, consumer("alone", "/s/alone"), consumer("ok", "/s/ok"))
	w.contributions(entries...)
	for range 20 {
		w.pass(5 * time.Second)
	}
	lines := w.log.lines()
	is.Equal(w.log.count("secrets of 1000 consumers not readable yet: their folder /run/mesh/secrets cannot be entered: "), 1) // named once
	is.Equal(w.log.count("CANNOT READ the secrets of 1000 consumers after 13 attempts: their folder /run/mesh/secrets cannot be entered: "), 1)
	is.Equal(w.log.count("alone: secret not readable yet (/s/alone)"), 12) // the spec's cadence for the rest
	is.Equal(w.log.count("alone: CANNOT READ the secret after 13 attempts"), 1)
	is.Equal(len(lines), 1+1+12+1) // nothing else
	is.Equal(w.backend.createsOf("ok"), 1)

	// The folder made, one secret written: created; the others start patient again.
	w.write("/run/mesh/secrets/m7/password", "pw")
	w.log.take()
	r := w.pass(5 * time.Second)
	is.Equal(w.backend.createsOf("m7"), 1)
	is.Equal(r.Consumers["m8"], domain.StateWaitingForSecret)
	is.Equal(w.log.count("m8: secret not readable yet"), 1)
}

// Where the watch covers every file (WatchedBy), a pass the timer started takes each known
// secret as last read, without a stat; a pass SIGHUP or a verify pass started looks at each
// again (a wake-up too: run_test.go), and so does every pass while the watch is not whole.
func TestAWatchedSecretIsLookedAtWhenWokenOrVerifying(t *testing.T) {
	is := is.New(t)
	w := newApplied(t)
	whole := true
	w.h.WatchedBy(func() bool { return whole })
	w.write("/s/letta", "rotated")
	w.pass(domain.DefaultEvery)
	is.Equal(w.backend.createsOf("letta"), 1) // the timer's pass: taken as last read
	w.h.RetryNow()                            // SIGHUP
	w.pass(time.Second)
	is.Equal(w.backend.createsOf("letta"), 2) // looked at: the rotation applied

	w.write("/s/letta", "again")
	w.pass(domain.DefaultEvery)
	is.Equal(w.backend.createsOf("letta"), 2)
	w.pass(domain.DefaultVerifyEvery) // a verify pass looks
	is.Equal(w.backend.createsOf("letta"), 3)

	whole = false // a folder the watch lost
	w.write("/s/letta", "third")
	w.pass(domain.DefaultEvery)
	is.Equal(w.backend.createsOf("letta"), 4) // every pass looks
}
