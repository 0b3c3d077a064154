package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/novox/postgres-provider/tests/pgserver"
	"github.com/novox/postgres-provider/tests/poll"
)

// BenchmarkFileChangeToRole is the time from the mesh replacing the contributions file to the
// new consumer's role existing on the server, with the timer an hour away: the watch, its
// debounce, one pass and one Create. The provisioner is built without the race detector.
func BenchmarkFileChangeToRole(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "provisioner")
	if _, err := pgserver.RunGroup(exec.Command("go", "build", "-o", bin, "../cmd/provisioner"), 10*time.Minute); err != nil {
		b.Fatalf("build: %v", err)
	}
	url := pgserver.Shared(b).URL
	m := newMesh(b)
	// Beside others already provisioned, where PROVISIONER_BENCH_BESIDE names how many (each
	// with pg_trgm): what a pass does for them stands between the wake and the new create.
	beside, _ := strconv.Atoi(os.Getenv("PROVISIONER_BENCH_BESIDE"))
	var others []consumer
	if beside > 0 {
		others = consumers("beside", beside, "pg_trgm")
	}
	m.give(others...)
	args := []string{"--database-url", url, "--every", "1h"}
	if every := os.Getenv("PROVISIONER_BENCH_VERIFY_EVERY"); every != "" { // a verify pass under way as the file changes
		args = append(args, "--every", every, "--verify-every", every)
	}
	g, err := pgserver.StartGroup(exec.Command(bin, m.args(args...)...), syscall.SIGKILL)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Stop(syscall.SIGTERM, stopGrace)

	// One connection to poll on: a new one per poll would cost more than what is measured.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	change := func(as string) {
		m.give(append(others, consumer{as: as, password: randomHex(8)})...) // the previous consumer leaves as this one comes
		await(b, conn, "SELECT count(*) FROM pg_roles WHERE rolname = '"+as+"'")
	}
	// settle waits for the rest of the pass that made as: its database, then the previous
	// consumer withdrawn, which is the pass's last step. Otherwise the next change would be
	// caught by a pass already under way, and the figure would flatter the watch.
	settle := func(as, previous string) {
		await(b, conn, "SELECT count(*) FROM pg_database WHERE datname = '"+as+"'")
		if previous != "" {
			await(b, conn, "SELECT count(*) FROM pg_roles WHERE rolname = '"+previous+"' AND NOT rolcanlogin")
		}
	}
	if beside > 0 { // made first, by the first pass
		last := others[len(others)-1].as
		if err := poll.Until(ctx, "the others made", 10*time.Minute, 100*time.Millisecond, func() (bool, error) {
			var n int
			err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", last).Scan(&n)
			return err == nil && n == 1, nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	// Two changes first, not timed: the passes of the start (the first, and the one the new
	// watch asks for) are over by then.
	previous := ""
	for range 2 {
		as := name("watch")
		change(as)
		settle(as, previous)
		previous = as
	}
	b.ResetTimer()
	var toDatabase time.Duration
	for range b.N {
		as := name("watch")
		began := time.Now()
		change(as)
		b.StopTimer()
		await(b, conn, "SELECT count(*) FROM pg_database WHERE datname = '"+as+"'")
		toDatabase += time.Since(began)
		settle(as, previous)
		previous = as
		b.StartTimer()
	}
	b.ReportMetric(float64(toDatabase.Milliseconds())/float64(b.N), "ms-to-database/op") // what the consumer waits for
}

// await polls until sql counts one row, for up to 30 s, every millisecond: what is measured is
// how soon it does.
func await(b *testing.B, conn *pgx.Conn, sql string) {
	err := poll.Until(ctx, sql, 30*time.Second, time.Millisecond, func() (bool, error) {
		var n int
		err := conn.QueryRow(ctx, sql).Scan(&n)
		return err == nil && n == 1, nil
	})
	if err != nil {
		b.Fatalf("never: %s", sql)
	}
}
