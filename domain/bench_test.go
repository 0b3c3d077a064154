package domain_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/novox/postgres-provider/adapters/files"
	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

// fleet writes, into dir on the real filesystem, a contributions file listing n consumers, each
// naming an extension, and their secrets; it answers the file's path.
func fleet(b *testing.B, dir string, n int) string {
	b.Helper()
	var entries []any
	for i := range n {
		as := fmt.Sprintf("consumer%05d", i)
		secret := filepath.Join(dir, as+".postgres")
		if err := os.WriteFile(secret, []byte("password-"+as+"\n"), 0o600); err != nil {
			b.Fatal(err)
		}
		entries = append(entries, map[string]any{"as": as, "secret": secret, "node": as, "at": "10.0.0.7",
			"values": map[string]any{"name": as, "extensions": []any{"vector"}}, "derived": map[string]any{"database": as}})
	}
	file := filepath.Join(dir, "contributions.json")
	raw := fmt.Sprintf(`{"requirement": "postgres", "given": %s}`, mustJSON(b, entries))
	if err := os.WriteFile(file, []byte(raw), 0o600); err != nil {
		b.Fatal(err)
	}
	return file
}

// cpuTime is the CPU time this process has used, user and system: what a pass costs the
// machine, whatever else runs on it.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// appliedFleet is a loop over n listed consumers, each created by its first pass, and the fake
// that made them.
func appliedFleet(b *testing.B, n int) (*domain.Harness, *fakeBackend) {
	file := fleet(b, b.TempDir(), n)
	backend := &fakeBackend{}
	h := domain.New(domain.Config{Resource: "postgres", Receives: file}, files.New(), clock.NewMock(), backend, nil, &fakeLogger{})
	if r := h.Reconcile(ctx); r.Created != n {
		b.Fatalf("created %d, want %d", r.Created, n)
	}
	return h, backend
}

// BenchmarkNoChangePass is one pass over consumers that are all applied and unchanged, between
// verify intervals: what the loop costs every Every while nothing happens. It reads the real
// files, and asks nothing of the backend.
func BenchmarkNoChangePass(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			h, backend := appliedFleet(b, n)
			managed := backend.managed
			b.ReportAllocs()
			before := cpuTime(b)
			for b.Loop() {
				h.Reconcile(ctx)
			}
			b.ReportMetric(float64((cpuTime(b)-before).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			if len(backend.creates) != n || len(backend.holdsCalls) != 0 || backend.managed != managed {
				b.Fatalf("a no-change pass asked the backend: %d creates, %d checks, %d reads of the record",
					len(backend.creates), len(backend.holdsCalls), backend.managed-managed)
			}
		})
	}
}

// refusingBackend refuses every create, as a server whose roles all exist and are not the
// provider's would: the error names the login, as the adapter's do.
type refusingBackend struct{ fakeBackend }

func (b *refusingBackend) Create(_ context.Context, p ports.Provision) (ports.Act, error) {
	return ports.ActRefuse, fmt.Errorf("create role %s: role %s exists, the provider did not make it, and it is superuser; it is not taken over: %w",
		p.As, p.As, ports.ErrRefused)
}

// BenchmarkRefusedPass is a pass over n consumers whose creates are all refused: the first
// pass, which asks the backend about every one and scrubs every failure, and then a pass a
// minute later. It is the case of 100,000 refused entries.
func BenchmarkRefusedPass(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			file := fleet(b, b.TempDir(), n)
			b.ReportAllocs()
			var first, later, firstCPU time.Duration
			for b.Loop() {
				clk := clock.NewMock()
				h := domain.New(domain.Config{Resource: "postgres", Receives: file}, files.New(), clk, &refusingBackend{}, nil, &fakeLogger{})
				start, cpu := time.Now(), cpuTime(b)
				if r := h.Reconcile(ctx); r.Failures != n {
					b.Fatalf("failed %d, want %d", r.Failures, n)
				}
				first += time.Since(start)
				firstCPU += cpuTime(b) - cpu
				clk.Add(time.Minute)
				start = time.Now()
				h.Reconcile(ctx)
				later += time.Since(start)
			}
			b.ReportMetric(float64(first.Milliseconds())/float64(b.N), "first-pass-ms")
			b.ReportMetric(float64(firstCPU.Milliseconds())/float64(b.N), "first-pass-cpu-ms")
			b.ReportMetric(float64(later.Milliseconds())/float64(b.N), "next-pass-ms")
		})
	}
}

// slowBackend takes a millisecond a create, and fails at once once its context is over, as the
// PostgreSQL backend does.
type slowBackend struct {
	fakeBackend
	started atomic.Int64
	stop    func()
	at      int64
}

func (b *slowBackend) Create(ctx context.Context, p ports.Provision) (ports.Act, error) {
	if b.started.Add(1) == b.at {
		b.stop() // SIGTERM, in the middle of the pass
	}
	select {
	case <-ctx.Done():
		return ports.ActNone, ctx.Err()
	case <-time.After(time.Millisecond):
		return ports.ActCreate, nil
	}
}

// BenchmarkStopMidPass is SIGTERM halfway through the first pass over n consumers, with a holds
// timeout of one second: stop-ms is how long Run took to return after it, which the README
// bounds by the holds timeout.
func BenchmarkStopMidPass(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			file := fleet(b, b.TempDir(), n)
			var took time.Duration
			for b.Loop() {
				rctx, stop := context.WithCancel(ctx)
				var stopped time.Time
				backend := &slowBackend{at: int64(n / 2), stop: func() { stopped = time.Now(); stop() }}
				h := domain.New(domain.Config{Resource: "postgres", Receives: file, HoldsTimeout: time.Second, Parallel: 8},
					files.New(), clock.New(), backend, nil, &fakeLogger{})
				h.Run(rctx, nil, nil)
				took += time.Since(stopped)
			}
			b.ReportMetric(float64(took.Milliseconds())/float64(b.N), "stop-ms")
		})
	}
}

// BenchmarkListedMemory is the loop's memory with n consumers listed and applied, each op a pass
// between verify intervals: the heap the loop keeps (in use after a collection, less what was
// in use before the loop was made, and with what the fake keeps of what it made let go), the
// test process's resident set (the loop's and the test's own), and a pass's CPU; watched, where
// the daemon's watch covers every folder (WatchedBy).
func BenchmarkListedMemory(b *testing.B) {
	for _, c := range []struct {
		n       int
		watched bool
	}{{10000, false}, {100000, false}, {100000, true}} {
		name := fmt.Sprint(c.n)
		if c.watched {
			name += "/watched"
		}
		b.Run(name, func(b *testing.B) {
			base := heapInuse()
			h, backend := appliedFleet(b, c.n)
			if c.watched { // the daemon's watch covers every folder: passes on the timer stat no secret
				h.WatchedBy(func() bool { return true })
			}
			// What the fake keeps of what it made is the server's, not the loop's: let go.
			// Passes between verify intervals ask the backend nothing.
			backend.creates, backend.store, backend.holders = nil, nil, nil
			before := cpuTime(b)
			for b.Loop() {
				h.Reconcile(ctx)
			}
			b.ReportMetric(float64((cpuTime(b)-before).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(heapInuse()-base)/(1<<20), "heap-inuse-MiB")
			if status, err := os.ReadFile("/proc/self/status"); err == nil {
				for _, line := range strings.Split(string(status), "\n") {
					if kb, ok := strings.CutPrefix(line, "VmRSS:"); ok {
						var rss float64
						_, _ = fmt.Sscan(strings.TrimSpace(kb), &rss)
						b.ReportMetric(rss/1024, "rss-MiB")
					}
				}
			}
			runtime.KeepAlive(h)
		})
	}
}

// heapInuse is the heap in use after a collection.
func heapInuse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
