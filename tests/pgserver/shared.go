package pgserver

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"testing"
)

// EnvURL names a server for the tests to use instead of starting one.
const EnvURL = "PROVISIONER_TEST_DATABASE_URL"

// TestServer is the server a test binary's tests share.
type TestServer struct {
	// URL is the superuser connection.
	URL string
	// Local is the server this process started, nil where EnvURL named one; only a local
	// server's log can be read.
	Local *Server
}

var shared struct {
	once sync.Once
	ts   *TestServer
	err  error
}

// Shared is the server for this test binary: the one EnvURL names, or one started on first use
// and stopped by Main. It logs every statement and loads pg_stat_statements, for the tests that
// look for a password where a server keeps statements; it allows 5 prepared transactions, for
// the tests of those that hold the provider's locks. It has an extension named vector where
// EnsureVector can make one.
func Shared(t testing.TB) *TestServer {
	t.Helper()
	shared.once.Do(func() {
		if url := os.Getenv(EnvURL); url != "" {
			shared.ts = &TestServer{URL: url}
			return
		}
		s, err := Start(Options{Settings: map[string]string{
			"log_statement":             "all",
			"shared_preload_libraries":  "pg_stat_statements",
			"max_prepared_transactions": "5",
		}})
		if err != nil {
			shared.err = err
			return
		}
		// Which server, and which vector, a run had: the stand-in is used where pgvector cannot
		// be built (the pinned npm binaries have no headers).
		if v, err := s.EnsureVector(); err != nil {
			fmt.Fprintf(os.Stderr, "pgserver: %s: no extension named vector: %v\n", s.Bin, err)
		} else {
			fmt.Fprintf(os.Stderr, "pgserver: vector on the server in %s: %s\n", s.Bin, v)
		}
		shared.ts = &TestServer{URL: s.URL, Local: s}
	})
	if shared.err != nil {
		t.Fatalf("start a throwaway PostgreSQL: %v", shared.err)
	}
	return shared.ts
}

// Main runs a test binary's tests and stops the shared server after them. Use it from TestMain:
// os.Exit(pgserver.Main(m)). A SIGINT, SIGTERM or SIGHUP stops every server this binary
// started, and ends it; the processes its tests started in groups of their own end with it, by
// the kernel's parent-death signal.
func Main(m *testing.M) int {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		sig := <-signals
		fmt.Fprintf(os.Stderr, "pgserver: %v: stopping the servers this test binary started\n", sig)
		if err := StopAll(); err != nil {
			fmt.Fprintf(os.Stderr, "pgserver: stop: %v\n", err)
		}
		os.Exit(128 + int(sig.(syscall.Signal)))
	}()
	code := m.Run()
	signal.Stop(signals)
	if err := StopAll(); err != nil {
		fmt.Fprintf(os.Stderr, "pgserver: stop: %v\n", err)
	}
	return code
}
