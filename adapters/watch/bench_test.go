package watch_test

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/novox/postgres-provider/adapters/watch"
)

// BenchmarkWatchUnchanged is what the watcher costs a pass when the files it is told about
// have not changed: 10,000 secrets, each in a folder of its own, as the loop hands them over
// after every pass.
func BenchmarkWatchUnchanged(b *testing.B) {
	const n = 10000
	root := b.TempDir()
	files := make([]string, 0, n+1)
	files = append(files, filepath.Join(root, "contributions.json"))
	for i := range n {
		dir := filepath.Join(root, fmt.Sprintf("c%05d", i))
		if err := os.Mkdir(dir, 0o700); err != nil {
			b.Fatal(err)
		}
		files = append(files, filepath.Join(dir, "secret"))
	}
	w, err := watch.New(time.Second, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	w.Watch(files)
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	for b.Loop() {
		w.Watch(files)
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
}
