package pgserver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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
// look for a password where a server keeps statements.
func Shared(t testing.TB) *TestServer {
	t.Helper()
	shared.once.Do(func() {
		if url := os.Getenv(EnvURL); url != "" {
			shared.ts = &TestServer{URL: url}
			return
		}
		s, err := Start(Options{Settings: map[string]string{
			"log_statement":            "all",
			"shared_preload_libraries": "pg_stat_statements",
		}})
		if err != nil {
			shared.err = err
			return
		}
		if _, err := s.EnsureVector(); err != nil {
			fmt.Fprintf(os.Stderr, "pgserver: no vector stand-in: %v\n", err)
		}
		shared.ts = &TestServer{URL: s.URL, Local: s}
	})
	if shared.err != nil {
		t.Fatalf("start a throwaway PostgreSQL: %v", shared.err)
	}
	return shared.ts
}

// Main runs a test binary's tests and stops the shared server after them. Use it from TestMain:
// os.Exit(pgserver.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if shared.ts != nil && shared.ts.Local != nil {
		if err := shared.ts.Local.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgserver: stop: %v\n", err)
		}
	}
	return code
}

// vectorControl and vectorScript are a stand-in for pgvector where the real one is absent: an
// untrusted extension named vector that defines a type vector, which is what consumers fail on.
const (
	vectorControl = `# A stand-in for pgvector, installed by the novox PostgreSQL provider's tests and make run
# where the real extension is absent. Installing the real pgvector replaces it.
comment = 'stand-in for pgvector: a vector type'
default_version = '0.0.1'
relocatable = true
trusted = false
superuser = true
`
	vectorScript = `\echo Use "CREATE EXTENSION vector" to load this file. \quit
CREATE DOMAIN vector AS real[];
`
)

// EnsureVector makes an extension named vector available on this server: the real one if it is
// installed, else the stand-in, written into the server's extension folder where that can be
// written. It answers whether vector is available.
func (s *Server) EnsureVector() (bool, error) {
	pgConfig := filepath.Join(s.Bin, "pg_config")
	if _, err := os.Stat(pgConfig); err != nil {
		pgConfig = "pg_config"
	}
	out, err := exec.Command(pgConfig, "--sharedir").Output()
	if err != nil {
		return false, fmt.Errorf("pg_config --sharedir: %w", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "extension")
	if _, err := os.Stat(filepath.Join(dir, "vector.control")); err == nil {
		return true, nil
	}
	// The script first and the control file last, each by rename, so that a server looking
	// at the folder meanwhile (another test binary's) never reads half a file.
	for _, f := range []struct{ name, content string }{{"vector--0.0.1.sql", vectorScript}, {"vector.control", vectorControl}} {
		tmp := filepath.Join(dir, fmt.Sprintf(".%s.%d", f.name, os.Getpid()))
		if err := os.WriteFile(tmp, []byte(f.content), 0o644); err != nil {
			return false, fmt.Errorf("the extension folder %s cannot be written: %w", dir, err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, f.name)); err != nil {
			_ = os.Remove(tmp)
			return false, fmt.Errorf("install %s: %w", f.name, err)
		}
	}
	return true, nil
}
