// The adapter's errors: the kinds the loop tells apart (ports.ErrRefused, ErrInvalid,
// ErrTransient), the server's SQLSTATEs the adapter acts on, and why the server could not be
// used, in one line an operator acts on.

package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/novox/postgres-provider/ports"
)

// kinded is an error of one of the kinds in ports (ErrRefused, ErrInvalid, ErrTransient), its
// text unchanged: what operators' alerts match on stays as it was, and the loop tells the kinds
// apart with errors.Is.
type kinded struct {
	err  error
	kind error
}

func (k kinded) Error() string   { return k.err.Error() }
func (k kinded) Unwrap() []error { return []error{k.err, k.kind} }

// refused is err of kind ports.ErrRefused: what exists and is not the provider's to take over.
func refused(err error) error { return kinded{err, ports.ErrRefused} }

// invalid is err of kind ports.ErrInvalid: what the consumer's entry asks for that can never
// be made.
func invalid(err error) error {
	if err == nil {
		return nil
	}
	return kinded{err, ports.ErrInvalid}
}

// transient is err of kind ports.ErrTransient: what may go away on its own.
func transient(err error) error { return kinded{err, ports.ErrTransient} }

// errNotRecorded is a role that exists and is in no provider's record.
var errNotRecorded = errors.New("not in the record")

// SQLSTATEs this adapter tells apart.
const (
	// Of a statement.
	undefinedObject       = "42704"
	duplicateDatabase     = "42P04"
	uniqueViolation       = "23505"
	lockNotAvailable      = "55P03"
	insufficientPrivilege = "42501"

	// Of a value the server rejects for a setting.
	invalidParameterValue     = "22023"
	invalidTextRepresentation = "22P02"

	// Of a server that will not let the provider in.
	invalidPassword      = "28P01"
	invalidAuthorization = "28000"
	tooManyConnections   = "53300"
	undefinedDatabase    = "3D000"
	cannotConnectNow     = "57P03"
	adminShutdown        = "57P01"
)

// pgMessage is the server's message of err, or err's text where it is not from the server.
func pgMessage(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Message
	}
	return err.Error()
}

// pgCode is err's SQLSTATE, or "" where err is not from the server.
func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// serverError is err, met while using the server as a whole, in one line that names the server
// (never its password) and says what to do.
func (r *reach) serverError(err error) error {
	return described{text: fmt.Sprintf("the server %s %s", r.server, reason(err)), err: err}
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
	case errors.As(err, &pgErr) && pgErr.Code == cannotConnectNow:
		return fmt.Sprintf("is starting or stopping (%s: %s)", pgErr.Code, pgErr.Message)
	case errors.As(err, &pgErr) && pgErr.Code == adminShutdown:
		// The server's fast shutdown and pg_terminate_backend say the same words.
		return fmt.Sprintf("ended the provider's session (%s: %s): it is stopping, or somebody terminated the session", pgErr.Code, pgErr.Message)
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
func (r *reach) connectError(err error) error {
	return described{text: fmt.Sprintf("connect: the server %s %s", r.server, reason(err)), err: err}
}

// unsupported is a server older than OldestMajor.
type unsupported struct{ version string }

func (u unsupported) Error() string {
	return fmt.Sprintf("is PostgreSQL %s, older than %d: the provider supports PostgreSQL %d to %d; upgrade the server",
		u.version, OldestMajor, OldestMajor, NewestMajor)
}

// standby is a server the provider reached in recovery: read only until it is promoted.
type standby struct{ server string }

func (s standby) Error() string {
	return fmt.Sprintf("the server %s is a standby (read only)", s.server)
}

func (s standby) Unwrap() []error { return []error{ports.ErrInRecovery, ports.ErrTransient} }

// turnedDown is a host the URL's target_session_attrs turned down for being read only or a
// standby, at its address.
type turnedDown struct {
	addr string
	err  error
}

func (t turnedDown) Error() string   { return t.addr + ": " + t.err.Error() }
func (t turnedDown) Unwrap() []error { return []error{t.err, ports.ErrInRecovery} }
