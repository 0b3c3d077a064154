package postgres

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/novox/postgres-provider/ports"
	"github.com/novox/postgres-provider/tests/pgserver"
)

// Connections to two databases of a server that refuses them fail with texts that name each
// database, and with one cause: what the loop says once for both.
func TestAFailedConnectionSharesItsCauseWhateverTheDatabase(t *testing.T) {
	is := is.New(t)
	addr, err := pgserver.FreeAddr()
	is.NoErr(err) // nobody listens there now: refused
	host, port, _ := net.SplitHostPort(addr)
	var errs []error
	for _, db := range []string{"f0001", "f0002"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := pgx.Connect(ctx, "postgres://provider@"+host+":"+port+"/"+db+"?sslmode=disable")
		cancel()
		is.True(err != nil) // refused
		errs = append(errs, checkErr(err, "check extensions in %s", db))
	}
	var a, b *ports.SharedError
	is.True(errors.As(errs[0], &a)) // marked with its shared cause
	is.True(errors.As(errs[1], &b))
	is.True(strings.Contains(a.Error(), "f0001")) // the text names its database, as before
	is.True(strings.HasPrefix(a.Error(), "check extensions in f0001: "))
	is.True(!strings.Contains(a.Cause, "f0001")) // the cause does not
	is.Equal(a.Cause, b.Cause)                   // one cause for both

	plain := checkErr(errors.New("relation missing"), "check extensions in %s", "f0001")
	is.True(!errors.As(plain, &a)) // what is no failed connection is the consumer's own
	is.Equal(plain.Error(), "check extensions in f0001: relation missing")
}
