// The server's version, read as every connection logs in: refused before 14, remembered.

package postgres

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/novox/postgres-provider/adapters/postgres/scram"
)

// The PostgreSQL versions the provider supports: the oldest it runs on, and the newest it is
// tested on (make test PG=<major>). A newer one is used, untested; an older one is refused.
const (
	OldestMajor = 14
	NewestMajor = 18
)

// serverChecked runs on every connection the Backend opens, before its first statement: the
// server's version, which the server reports as it lets the provider in, is read, and an older
// server than OldestMajor is refused (the connection fails, and so does Managed, with a line
// that names the version). It also tells the verifier check whether the server still takes md5.
func (b *Backend) serverChecked(ctx context.Context, conn *pgconn.PgConn) error {
	version := conn.ParameterStatus("server_version")
	major, ok := majorOf(version)
	if !ok { // not reported (a pooler in between): asked
		res := conn.ExecParams(ctx, "SELECT pg_catalog.current_setting('server_version_num')", nil, nil, nil, nil).Read()
		if res.Err != nil {
			return fmt.Errorf("read the server's version: %w", res.Err)
		}
		num := ""
		if len(res.Rows) == 1 && len(res.Rows[0]) == 1 {
			num = string(res.Rows[0][0])
		}
		n, err := strconv.Atoi(num)
		if err != nil {
			return fmt.Errorf("read the server's version: it said %q", num)
		}
		major, version = n/10000, num
	}
	if major < OldestMajor {
		return unsupported{version: version}
	}
	b.major.CompareAndSwap(0, int32(major))
	// PostgreSQL 18 deprecates md5 passwords: a role stored as md5 there is drift, and gets a
	// SCRAM-SHA-256 verifier.
	b.verified.md5Counts.Store(major < 18)
	return nil
}

// majorOf is the major version in a server_version ("18.4", "15.8 (Debian 15.8-0+deb12u1)",
// "19devel", "18beta1").
func majorOf(version string) (int, bool) {
	end := 0
	for end < len(version) && version[end] >= '0' && version[end] <= '9' {
		end++
	}
	n, err := strconv.Atoi(version[:end])
	return n, err == nil && n > 0
}

// sessionIterations is the session's scram_iterations (PostgreSQL 16 and later report it as it
// changes), or PostgreSQL's default where the server does not say: the verifiers the provider
// computes cost what the server's own would.
func sessionIterations(conn *pgconn.PgConn) int {
	n, err := strconv.Atoi(conn.ParameterStatus("scram_iterations"))
	if err != nil || n < 1 || n > scram.MaxIterations {
		return scram.DefaultIterations
	}
	return n
}
