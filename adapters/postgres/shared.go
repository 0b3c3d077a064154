// What consumers' errors share: the cause of a connection that could not be opened, or of the
// one catalog question every check (or plan) waits for.

package postgres

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/novox/postgres-provider/ports"
)

// connectCause is what a failed connection to one consumer's database meets that a
// connection to any other database of the server would meet alike: pgx's ConnectError names
// the user and the database, and what it wraps (each address tried and why it failed) does
// not. A cause that names the database after all (it does not exist) is that consumer's own,
// and groups with no other. ok is false where err is no failed connection.
func connectCause(err error) (cause string, ok bool) {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) || ce.Unwrap() == nil {
		return "", false
	}
	return ce.Unwrap().Error(), true
}

// checkErr is a check's error, what was being done (format and args) said before it, marked
// with the cause it shares with other consumers' checks where it is a failed connection.
func checkErr(err error, format string, args ...any) error {
	wrapped := fmt.Errorf(format+": %w", append(args, err)...)
	if cause, ok := connectCause(err); ok {
		return &ports.SharedError{Err: wrapped, Cause: cause}
	}
	return wrapped
}

// askedErr is the error of a consumer whose check waited on a catalog question, asked once for
// many, that failed with err: the one cause of them all, said of each as a check of its role.
func askedErr(role string, err error) error {
	return &ports.SharedError{Err: fmt.Errorf("check %s: %w", role, err), Cause: err.Error()}
}
