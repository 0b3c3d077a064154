package postgres_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/novox/postgres-provider/adapters/postgres/archive"
)

// rowBytes is what one row of the archive benchmark's table takes on disk: a 24-byte tuple
// header, an int, 232 characters of text and a line pointer, 30 rows to an 8 kB page.
const rowBytes = 273

// BenchmarkArchiveAgainstPgDump is the archive of a database of PROVISIONER_BENCH_ARCHIVE_MB
// megabytes (1024 unless set) to a folder against its floor, pg_dump alone writing the same
// custom-format file: the issue allows the archive 1.1x. Each iteration is a round, the floor
// then the archive, so that the machine's load falls on both alike; a round reports its floor
// and archive in seconds and their ratio, and the benchmark the worst ratio. It takes minutes
// (filling the database the most), so run it alone: -bench BenchmarkArchiveAgainstPgDump
// -benchtime 3x -timeout 60m.
func BenchmarkArchiveAgainstPgDump(b *testing.B) {
	is := is.New(b)
	e := newEnv(b)
	pgDump := e.pgDumpFor()
	mb := 1024
	if v := os.Getenv("PROVISIONER_BENCH_ARCHIVE_MB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("PROVISIONER_BENCH_ARCHIVE_MB=%q: not a positive number of megabytes", v)
		}
		mb = n
	}

	db := name("bench")
	e.exec("", "CREATE DATABASE "+db)
	b.Cleanup(func() { e.exec("", "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)") })
	began := time.Now()
	rows := int64(mb) << 20 / rowBytes
	// Frozen and checkpointed, so that no round pays for the fill's hint bits or dirty pages.
	e.exec(db, fmt.Sprintf("CREATE TABLE t AS SELECT g, md5(g::text) || repeat('x', 200) AS pad FROM generate_series(1, %d) g", rows),
		"VACUUM (FREEZE, ANALYZE) t", "CHECKPOINT")
	var size int64
	is.NoErr(e.admin("").QueryRow(ctx, "SELECT pg_database_size($1)", db).Scan(&size))
	b.Logf("database %s: %d rows, %d MB on disk (asked %d MB), filled in %s", db, rows, size>>20, mb, time.Since(began).Round(time.Second))

	cfg, err := pgx.ParseConfig(e.srv.URL)
	is.NoErr(err) // parse url
	ssl := "prefer"
	if cfg.TLSConfig == nil {
		ssl = "disable"
	}
	src := archive.Source{Env: []string{"PGHOST=" + cfg.Host, "PGPORT=" + strconv.Itoa(int(cfg.Port)), "PGUSER=" + cfg.User,
		"PGPASSWORD=" + cfg.Password, "PGDATABASE=" + db, "PGSSLMODE=" + ssl}}
	// The floor has the archiver's environment: the few variables it passes on, then libpq's.
	var env []string
	for _, k := range []string{"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	env = append(env, src.Env...)
	dir := b.TempDir()

	worst, round := 0.0, 0
	var floors, archives time.Duration
	for b.Loop() {
		round++
		floorFile := filepath.Join(dir, "floor.dump")
		dump := exec.CommandContext(ctx, pgDump, "--format=custom", "--no-password", "--file="+floorFile)
		dump.Env = env
		var stderr bytes.Buffer
		dump.Stderr = &stderr
		start := time.Now()
		if err := dump.Run(); err != nil {
			b.Fatalf("pg_dump: %v: %s", err, stderr.String())
		}
		floor := time.Since(start)
		floorSize := mustSize(b, floorFile)

		start = time.Now()
		to, err := archive.New(archive.Config{Dir: dir, PgDump: pgDump})
		is.NoErr(err) // archiver
		made, err := to.Archive(ctx, src, "archive.dump")
		is.NoErr(err) // archived
		took := time.Since(start)

		ratio := took.Seconds() / floor.Seconds()
		worst = max(worst, ratio)
		floors, archives = floors+floor, archives+took
		b.Logf("round %d: floor %.2fs (%d MB), archive %.2fs (%d MB), ratio %.3f", round, floor.Seconds(), floorSize>>20,
			took.Seconds(), made.Size>>20, ratio)
		b.ReportMetric(floor.Seconds(), fmt.Sprintf("floor-s-r%d", round))
		b.ReportMetric(took.Seconds(), fmt.Sprintf("archive-s-r%d", round))
		b.ReportMetric(ratio, fmt.Sprintf("ratio-r%d", round))
		is.NoErr(os.Remove(floorFile))
		is.NoErr(os.Remove(filepath.Join(dir, made.Name)))
	}
	b.ReportMetric(worst, "worst-ratio")
	// On a shared machine pg_dump's own time varies by a quarter between identical rounds: the
	// rounds' total says what the archive adds better than the worst round.
	b.ReportMetric(archives.Seconds()/floors.Seconds(), "total-ratio")
	b.ReportMetric(float64(size)/(1<<20), "db-MB")
	// ns/op would add floor, archive and the files' removal together: the rounds' figures say more.
	b.ReportMetric(0, "ns/op")
}

// mustSize is the size of the file at path.
func mustSize(b *testing.B, path string) int64 {
	b.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatalf("size of %s: %v", path, err)
	}
	return fi.Size()
}
