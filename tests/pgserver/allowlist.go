package pgserver

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// AllowListed are the extensions the allow-listing server lets a role that is not a superuser
// create: letta's vector and pg_trgm, as a managed service allow-lists them for its admin, and
// the security tests' extension whose script calls a function unqualified. dblink is not among
// them: the server refuses it to such a role.
var AllowListed = []string{"vector", "pg_trgm", "novox_trojan_test"}

var allowListing struct {
	once sync.Once
	ts   *TestServer
	skip string
	err  error
}

// AllowListing is a second server for this test binary, started on first use and stopped by
// Main, that preloads pgextwlist (session_preload_libraries) with AllowListed as its allow-list
// (extwlist.extensions): how RDS, Cloud SQL and Azure let their admin, who is not a superuser,
// create the extensions they allow, each run as the bootstrap superuser. Otherwise it is set
// as Shared's is (every statement logged, pg_stat_statements, vector where EnsureVector can
// make it). The test is skipped, saying why, where this machine has no server binaries, or
// the server has no pgextwlist (Debian's postgresql-<major>-pgextwlist; the pinned npm binaries
// of make test PG=<major> ship none).
func AllowListing(t testing.TB) *TestServer {
	t.Helper()
	allowListing.once.Do(func() {
		bin, err := findBin()
		if err != nil {
			allowListing.skip = "no server binaries to start a server preloading pgextwlist: " + err.Error()
			return
		}
		f, err := folders(bin)
		if err != nil {
			allowListing.err = err
			return
		}
		if !exists(filepath.Join(f.Lib, "pgextwlist.so")) {
			allowListing.skip = fmt.Sprintf("the server in %s has no pgextwlist (no %s): allow-listed extensions are tested "+
				"where it has (Debian's postgresql-<major>-pgextwlist, which .ci/ensure-postgres installs beside Debian's "+
				"server; the pinned npm binaries of make test PG=<major> have none)", bin, filepath.Join(f.Lib, "pgextwlist.so"))
			return
		}
		s, err := Start(Options{Settings: map[string]string{
			"log_statement":             "all",
			"shared_preload_libraries":  "pg_stat_statements",
			"max_prepared_transactions": "5",
			"session_preload_libraries": "pgextwlist",
			"extwlist.extensions":       strings.Join(AllowListed, ","),
		}})
		if err != nil {
			allowListing.err = err
			return
		}
		if v, err := s.EnsureVector(); err != nil {
			fmt.Fprintf(os.Stderr, "pgserver: %s (pgextwlist): no extension named vector: %v\n", s.Bin, err)
		} else {
			fmt.Fprintf(os.Stderr, "pgserver: the server preloading pgextwlist in %s allow-lists %s; vector is %s\n",
				s.Bin, strings.Join(AllowListed, ", "), v)
		}
		allowListing.ts = &TestServer{URL: s.URL, Local: s}
	})
	if allowListing.err != nil {
		t.Fatalf("start a throwaway PostgreSQL preloading pgextwlist: %v", allowListing.err)
	}
	if allowListing.skip != "" {
		t.Skip(allowListing.skip)
	}
	return allowListing.ts
}
