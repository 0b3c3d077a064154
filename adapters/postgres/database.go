// A consumer's database: made closed, owned by its role, connectable by nobody else, then opened.

package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/novox/postgres-provider/ports"
)

// sqlOthers is an ACL item a of a database d that is not its owner's nor the provider's.
const sqlOthers = `a.grantee <> d.datdba AND a.grantee <> (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user)`

// ensureDatabase creates the database owned by role, or checks that role owns it; a database
// owned by another role is never handed over. Nobody but its owner may connect to it, not even
// for a moment: it is created not accepting connections, PUBLIC loses CONNECT and TEMPORARY,
// and only then are connections allowed. Where others could connect, they can no longer, and
// their sessions in it are ended (a superuser's and the owner's stay). It is never a template,
// which anyone allowed to create databases could copy (one made here, closed until then, had
// nobody in it to end). f is what Create observed of the consumer before it wrote the role, cs
// the verdict's changes and s the stance it was decided under; the database is read again,
// and compared again, only where it is made. It answers the observation as it stands after,
// the changes as they stand after (the role's settings in the database among them: made
// here, the database has none), and whether it changed anything; it adds to told what it did
// that the operator is told (sessions of others ended).
func (b *Backend) ensureDatabase(ctx context.Context, conn *pgxpool.Conn, d definition, s stance, f observed, cs []change, told *facts) (_ observed, _ []change, changed bool, err error) {
	db, role := d.database, d.role
	madeClosed := false // made here, closed: nobody else is in it to end
	if !f.database {
		_, err := conn.Exec(ctx, "CREATE DATABASE "+ident(db)+" OWNER "+ident(role)+" ALLOW_CONNECTIONS false")
		madeClosed = err == nil
		if pgCode(err) == duplicateDatabase || madeMeanwhile(err) {
			err = nil // made by someone else since we looked; whose it is decides
		}
		if err != nil {
			return f, cs, false, err
		}
		changed = true
		if f, err = observe(ctx, conn, s.powers, role, db, reading{}); err != nil {
			return f, cs, changed, err
		}
		if err := d.handedOver(f); err != nil { // a CREATE DATABASE of another's may have won the race
			return f, cs, changed, err
		}
		cs = nil
		if f.database { // dropped again meanwhile: nothing of it to write
			cs = d.databaseChanges(f, s.powers)
		}
	}
	if writes(cs, databaseWriter) {
		changed = true
		if err := asOwner(ctx, conn, role, s.asMember, func(tx pgx.Tx) error { return closeAndOpen(ctx, tx, db, b.self, f.open, cs) }); err != nil {
			return f, cs, changed, err
		}
	}
	if len(f.open) > 0 && !madeClosed {
		ended, err := terminate(ctx, conn, othersIn, db, role)
		if err != nil {
			return f, cs, changed, fmt.Errorf("end the sessions of others: %w", err)
		}
		if len(ended) > 0 {
			told.did(role, "%s: the database %s was open to others (%v); no longer, and %d session(s) of others in it were ended",
				role, db, f.open, len(ended))
		}
	}
	return f, cs, changed, nil
}

// Clashes answers, for each of ps in their order, nil, or where its database is an earlier
// one's, Create's refusal naming the earlier consumer. An entry whose names are invalid clashes
// with nothing: Create says what is wrong with it.
func (b *Backend) Clashes(ps []ports.Provision) []error {
	out := make([]error, len(ps))
	first := make(map[string]string, len(ps)) // database: the first consumer that asks for it
	for i, p := range ps {
		w, err := b.rules.wantedOf(p)
		if err != nil {
			continue
		}
		switch as, ok := first[w.database]; {
		case !ok:
			first[w.database] = w.role
		case as != w.role:
			out[i] = atDatabase(w.database, hasIt(as))
		}
	}
	return out
}

// madeMeanwhile is whether err is CREATE DATABASE meeting a database of that name made by a
// concurrent CREATE DATABASE after it looked: the catalog's unique index, not 42P04.
func madeMeanwhile(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == uniqueViolation && pgErr.ConstraintName == "pg_database_datname_index"
}
