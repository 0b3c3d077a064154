// A consumer's database: made closed, owned by its role, connectable by nobody else, then opened.

package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/novox/postgres-provider/ports"
)

// dbFacts is what the catalog says of a consumer's database.
type dbFacts struct {
	exists   bool
	owner    string
	allowed  bool     // datallowconn
	template bool     // datistemplate
	open     []string // who besides the owner and the provider may connect: PUBLIC or roles granted CONNECT
	provides bool     // the provider may connect to it and create in it
	// ownerComment is its owner's comment: where it is this provider's record, the owner is
	// another consumer.
	ownerComment *string
}

// sqlOthers is an ACL item a of a database d that is not its owner's nor the provider's.
const sqlOthers = `a.grantee <> d.datdba AND a.grantee <> (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user)`

// databaseFacts reads dbFacts for db.
func databaseFacts(ctx context.Context, conn *pgxpool.Conn, db string) (dbFacts, error) {
	var f dbFacts
	err := conn.QueryRow(ctx, `
SELECT pg_catalog.pg_get_userbyid(d.datdba), d.datallowconn, d.datistemplate,
       ARRAY(SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee) END
             FROM pg_catalog.aclexplode(coalesce(d.datacl, pg_catalog.acldefault('d', d.datdba))) a
             WHERE a.privilege_type = 'CONNECT' AND `+sqlOthers+` ORDER BY 1),
       pg_catalog.has_database_privilege(d.oid, 'CONNECT') AND pg_catalog.has_database_privilege(d.oid, 'CREATE'),
       pg_catalog.shobj_description(d.datdba, 'pg_authid')
FROM pg_catalog.pg_database d WHERE d.datname = $1`, db).Scan(&f.owner, &f.allowed, &f.template, &f.open, &f.provides, &f.ownerComment)
	if errors.Is(err, pgx.ErrNoRows) {
		return dbFacts{}, nil
	}
	f.exists = err == nil
	return f, err
}

// ensureDatabase creates the database owned by role, or checks that role owns it; a database
// owned by another role is never handed over. Nobody but its owner may connect to it, not even
// for a moment: it is created not accepting connections, PUBLIC loses CONNECT and TEMPORARY,
// and only then are connections allowed. Where others could connect, they can no longer, and
// their sessions in it are ended (a superuser's and the owner's stay). It is never a template,
// which anyone allowed to create databases could copy. It answers whether it changed anything.
func (b *Backend) ensureDatabase(ctx context.Context, conn *pgxpool.Conn, db, role string) (changed bool, err error) {
	f, err := databaseFacts(ctx, conn, db)
	if err != nil {
		return false, err
	}
	if !f.exists {
		_, err := conn.Exec(ctx, "CREATE DATABASE "+ident(db)+" OWNER "+ident(role)+" ALLOW_CONNECTIONS false")
		if pgCode(err) == duplicateDatabase || madeMeanwhile(err) {
			err = nil // made by someone else since we looked; whose it is decides
		}
		if err != nil {
			return false, err
		}
		changed = true
		if f, err = databaseFacts(ctx, conn, db); err != nil {
			return changed, err
		}
	}
	if err := b.notHandedOver(f, role); err != nil {
		return changed, err
	}
	if len(f.open) > 0 || !f.allowed || f.template || b.delegated() && !f.provides {
		changed = true
		if err := b.asOwner(ctx, conn, role, func(tx pgx.Tx) error { return b.closeAndOpen(ctx, tx, db, f) }); err != nil {
			return changed, err
		}
	}
	if len(f.open) > 0 {
		ended, err := terminate(ctx, conn, othersIn, db, role)
		if err != nil {
			return changed, fmt.Errorf("end the sessions of others: %w", err)
		}
		if len(ended) > 0 {
			b.say(slog.LevelWarn, role, "%s: the database %s was open to others (%v); no longer, and %d session(s) of others in it were ended",
				role, db, f.open, len(ended))
		}
	}
	return changed, nil
}

// notHandedOver refuses a database that exists and another role owns: Create never hands one
// over, and Foresee says so. Where the owner is another consumer of the provider's, it says
// which (anothers).
func (b *Backend) notHandedOver(f dbFacts, role string) error {
	if err := b.anothers(f, role); err != nil {
		return err
	}
	if f.exists && f.owner != role {
		return refused(fmt.Errorf("the database exists and is owned by %q, not %q; it is not handed over", f.owner, role))
	}
	return nil
}

// anothers refuses a database that another consumer of the provider's has (its owner's record
// is the provider's, on that very role): one database is never given to two consumers. Create
// and Foresee ask it before anything of the consumer is made, so that no role is made for a
// consumer whose database is another's.
func (b *Backend) anothers(f dbFacts, role string) error {
	if !f.exists || f.owner == role {
		return nil
	}
	if r, ok := parseRecord(f.ownerComment); ok && r.Resource == b.resource && b.foreign(f.owner, r) == "" {
		return hasIt(f.owner)
	}
	return nil
}

// hasIt is the refusal of a database that the consumer as has: the same words whether it was
// made in an earlier pass (anothers) or both ask for it in one (Clashes).
func hasIt(as string) error {
	return refused(fmt.Errorf("consumer %s has it; one database is never given to two consumers", as))
}

// Clashes answers, for each of ps in their order, nil, or where its database is an earlier
// one's, Create's refusal naming the earlier consumer. An entry whose names are invalid clashes
// with nothing: Create says what is wrong with it.
func (b *Backend) Clashes(ps []ports.Provision) []error {
	out := make([]error, len(ps))
	first := make(map[string]string, len(ps)) // database: the first consumer that asks for it
	for i, p := range ps {
		w, err := b.wantedOf(p)
		if err != nil {
			continue
		}
		switch as, ok := first[w.database]; {
		case !ok:
			first[w.database] = w.role
		case as != w.role:
			out[i] = fmt.Errorf("create database %s: %w", w.database, hasIt(as))
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

// closeAndOpen, as the database's owner, takes from everyone but its owner the right to
// connect to db (PUBLIC's default rights include CONNECT and TEMPORARY; others are revoked as
// found), then lets connections in and makes sure it is no template. A provider that is not a
// superuser keeps CREATE on it, to make its extensions schema there.
func (b *Backend) closeAndOpen(ctx context.Context, tx pgx.Tx, db string, f dbFacts) error {
	if len(f.open) > 0 {
		if _, err := tx.Exec(ctx, "REVOKE CONNECT, TEMPORARY ON DATABASE "+ident(db)+" FROM PUBLIC"); err != nil {
			return err
		}
		for _, grantee := range f.open {
			if grantee == "PUBLIC" || grantee == b.self {
				continue
			}
			if _, err := tx.Exec(ctx, "REVOKE CONNECT ON DATABASE "+ident(db)+" FROM "+ident(grantee)); err != nil {
				return err
			}
		}
	}
	if b.delegated() && !f.provides {
		if _, err := tx.Exec(ctx, "GRANT CONNECT, CREATE ON DATABASE "+ident(db)+" TO "+ident(b.self)); err != nil {
			return err
		}
	}
	if !f.allowed || f.template {
		if _, err := tx.Exec(ctx, "ALTER DATABASE "+ident(db)+" WITH ALLOW_CONNECTIONS true IS_TEMPLATE false"); err != nil {
			return err
		}
	}
	return nil
}
