// The server as a whole: why it could not be used, in one line an operator acts on.

package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/novox/postgres-provider/ports"
)

// SQLSTATEs of a server that will not let the provider in.
const (
	invalidPassword      = "28P01"
	invalidAuthorization = "28000"
	tooManyConnections   = "53300"
	undefinedDatabase    = "3D000"
	cannotConnectNow     = "57P03"
	adminShutdown        = "57P01"
)

// serverError is err, met while using the server as a whole, in one line that names the server
// (never its password) and says what to do.
func (b *Backend) serverError(err error) error {
	return described{text: fmt.Sprintf("the server %s %s", b.server, reason(err)), err: err}
}

// described is an error whose text is said in the adapter's own words, and which still wraps
// what it came from, for errors.Is. A server that cannot be used now may be usable on the next
// pass: it is of kind ports.ErrTransient.
type described struct {
	text string
	err  error
}

func (d described) Error() string   { return d.text }
func (d described) Unwrap() []error { return []error{d.err, ports.ErrTransient} }

// reason says in one line why the server could not be used: pgx's connect errors hold every
// address and TLS attempt tried, which is more than an operator needs.
func reason(err error) string {
	var pgErr *pgconn.PgError
	var netErr *net.OpError
	var old unsupported
	if text := noPrimary(err); text != "" {
		return text
	}
	switch {
	case errors.As(err, &old):
		return old.Error()
	case errors.As(err, &pgErr) && pgErr.Code == invalidPassword:
		return "refused the provider's password (28P01): check the password of the connection URL (--database-url or PROVISIONER_DATABASE_URL)"
	case errors.As(err, &pgErr) && pgErr.Code == invalidAuthorization:
		return fmt.Sprintf("does not let the provider in (28000: %s): check the user of the connection URL and the server's pg_hba.conf", pgErr.Message)
	case errors.As(err, &pgErr) && pgErr.Code == undefinedDatabase:
		return fmt.Sprintf("has no such database (3D000: %s): check the provider's database (--provider-database, postgres by default)", pgErr.Message)
	case errors.As(err, &pgErr) && pgErr.Code == tooManyConnections:
		return fmt.Sprintf("has no connection slot left (53300: %s)", pgErr.Message)
	case errors.As(err, &pgErr) && (pgErr.Code == cannotConnectNow || pgErr.Code == adminShutdown):
		return fmt.Sprintf("is starting or stopping (%s: %s)", pgErr.Code, pgErr.Message)
	case errors.As(err, &pgErr):
		return fmt.Sprintf("answered an error: %s (%s)", pgErr.Message, pgErr.Code)
	case errors.Is(err, context.DeadlineExceeded):
		return "did not answer in time: " + err.Error()
	case errors.As(err, &netErr):
		return "cannot be reached: " + netErr.Error()
	default:
		return "cannot be used: " + err.Error()
	}
}

// connectError is the error of a per-consumer call that could not reach the server, in one line.
func (b *Backend) connectError(err error) error {
	return described{text: fmt.Sprintf("connect: the server %s %s", b.server, reason(err)), err: err}
}
