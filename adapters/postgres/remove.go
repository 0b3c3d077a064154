package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Remove withdraws the login as: the role loses LOGIN, its sessions end, and its record is
// marked withdrawn (since now, unless it was already); the database and its data stay, and a
// later Create gives the login back. A role that is gone is no error; one the record does not
// give this provider is refused and left as it is.
func (b *Backend) Remove(ctx context.Context, as string, derived map[string]any) error {
	return b.withdrawn(ctx, as, true, func(context.Context, *pgxpool.Conn, record) error { return nil })
}

// withdrawn withdraws the login as, under its lock (marking its record withdrawn where mark
// says so), and where the role exists, then runs then with its record.
func (b *Backend) withdrawn(ctx context.Context, as string, mark bool, then func(context.Context, *pgxpool.Conn, record) error) error {
	if err := b.checkName("login", as); err != nil {
		return err
	}
	return b.locked(ctx, as, func(ctx context.Context, conn *pgxpool.Conn) error {
		r, exists, err := b.withdrawLogin(ctx, conn, as, mark)
		if err != nil || !exists {
			return err
		}
		if err := endSessions(ctx, conn, as); err != nil {
			return err
		}
		return then(ctx, conn, r)
	})
}

// Drop removes everything of the login as, in an order that finishes: the login first (so
// nobody works on while it goes), then its database (the one its record names), then what it still owns
// or was granted in every other database (DROP OWNED, in each), then the role, and its record
// with it. Objects the consumer made elsewhere are dropped, not handed to the provider: a
// function of the consumer's owned by a superuser would run as one. A role that is gone is no
// error; one the record does not give this provider is refused and left as it is.
func (b *Backend) Drop(ctx context.Context, as string, derived map[string]any) error {
	// The record is not marked withdrawn first: a Drop cut short leaves it as it was, and the
	// next pass withdraws, and drops, again.
	return b.withdrawn(ctx, as, false, func(ctx context.Context, conn *pgxpool.Conn, r record) error {
		// In one round trip: the databases the role owns, the others it holds something in,
		// and whether it holds anything here or on shared objects besides its databases
		// (grants on a database, a tablespace), which DROP OWNED here takes away.
		var owned, others []string
		var here bool
		err := conn.QueryRow(ctx, `WITH r AS (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = $1),
deps AS (SELECT s.* FROM pg_catalog.pg_shdepend s, r
         WHERE s.refclassid = 'pg_catalog.pg_authid'::pg_catalog.regclass AND s.refobjid = r.oid)
SELECT ARRAY(SELECT datname::text FROM pg_catalog.pg_database, r WHERE datdba = r.oid ORDER BY 1),
       ARRAY(SELECT DISTINCT d.datname::text FROM deps JOIN pg_catalog.pg_database d ON d.oid = deps.dbid
             WHERE d.datname <> current_database() ORDER BY 1),
       EXISTS (SELECT 1 FROM deps WHERE deps.dbid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())
               OR (deps.dbid = 0 AND NOT (deps.classid = 'pg_catalog.pg_database'::pg_catalog.regclass AND deps.deptype = 'o')))`,
			as).Scan(&owned, &others, &here)
		if err != nil {
			return fmt.Errorf("list what %s holds: %w", as, err)
		}
		// Only the database the record names is the provider's to drop: any other the role
		// owns was given to it by somebody else, and is kept (and so, the role).
		database := r.Database
		if database == "" { // a record that names none: the database as Create names it
			if database, err = databaseOf(as, nil, r.Derived); err != nil {
				return fmt.Errorf("drop %s: %w", as, err)
			}
		}
		if others := slices.DeleteFunc(slices.Clone(owned), func(db string) bool { return db == database }); len(others) > 0 {
			return fmt.Errorf("role %s also owns %s, which the provider did not make for it; not dropped: give %s another "+
				"owner (ALTER DATABASE ... OWNER TO) or drop %s, and the drop is tried again", as,
				strings.Join(others, ", "), them(len(others)), them(len(others)))
		}
		if slices.Contains(owned, database) {
			if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(database)+" WITH (FORCE)"); err != nil {
				return fmt.Errorf("drop database %s: %w", database, err)
			}
		}
		for _, db := range others {
			if !slices.Contains(owned, db) {
				if err := b.dropOwnedIn(ctx, db, as); err != nil {
					return err
				}
			}
		}
		if here {
			if _, err := conn.Exec(ctx, "DROP OWNED BY "+ident(as)); err != nil {
				return fmt.Errorf("drop what %s owns: %w", as, err)
			}
		}
		if _, err := conn.Exec(ctx, "DROP ROLE IF EXISTS "+ident(as)); err != nil {
			return fmt.Errorf("drop role %s: %w", as, err)
		}
		b.verified.forget(as)
		return nil
	})
}

// withdrawLogin takes LOGIN from the role and, where mark says so, marks its record withdrawn,
// in one transaction. It answers the role's record, and whether the role exists.
func (b *Backend) withdrawLogin(ctx context.Context, conn *pgxpool.Conn, as string, mark bool) (record, bool, error) {
	var (
		exists bool
		r      record
	)
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		f, err := factsOf(ctx, tx, as, "")
		if err != nil || !f.exists {
			return err
		}
		exists = true
		r, err = b.ours(as, f)
		if errors.Is(err, errNotRecorded) {
			return fmt.Errorf("role %s is not in the record of what the provider manages; it is not withdrawn", as)
		}
		if err != nil {
			return err
		}
		// Its sessions end first: one of them may hold the role's row (a consumer may alter its
		// own role in an open transaction), and NOLOGIN would wait for it to its lock_timeout,
		// every pass. Those that log in meanwhile are ended after.
		if _, err := tx.Exec(ctx, endSessionsSQL, as); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "ALTER ROLE "+ident(as)+" NOLOGIN"); err != nil {
			return err
		}
		if !mark || r.State == withdrawn && r.Since != nil {
			return nil
		}
		now := time.Now().UTC().Truncate(time.Second)
		r.State, r.Since = withdrawn, &now
		return setRecord(ctx, tx, as, r)
	})
	if err != nil {
		return record{}, false, fmt.Errorf("withdraw login %s: %w", as, err)
	}
	return r, exists, nil
}

// dropOwnedIn drops what role owns in db, and revokes what it was granted there.
func (b *Backend) dropOwnedIn(ctx context.Context, db, role string) error {
	conn, err := b.connectTo(ctx, db, false)
	if err != nil {
		return fmt.Errorf("drop what %s owns in %s: %w", role, db, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "DROP OWNED BY "+ident(role)); err != nil {
		return fmt.Errorf("drop what %s owns in %s: %w", role, db, err)
	}
	return nil
}

// them is "it" or "them".
func them(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

// endSessionsSQL ends every session of the role $1.
const endSessionsSQL = "SELECT pg_catalog.pg_terminate_backend(pid) FROM pg_catalog.pg_stat_activity " +
	"WHERE usename = $1 AND pid <> pg_catalog.pg_backend_pid()"

// endSessions ends every session of role.
func endSessions(ctx context.Context, conn *pgxpool.Conn, role string) error {
	_, err := conn.Exec(ctx, endSessionsSQL, role)
	if err != nil {
		return fmt.Errorf("end sessions of %s: %w", role, err)
	}
	return nil
}

// collect is the first column of every row sql answers.
func collect(ctx context.Context, conn *pgxpool.Conn, sql string, args ...any) ([]string, error) {
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
