// Remove and Drop: a consumer withdrawn (its login taken, its data kept), or dropped with
// everything the record says was made for it, and nothing else.

package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Remove withdraws the login as: the role loses LOGIN, its sessions end, and its record is
// marked withdrawn (since now, unless it was already); the database and its data stay, and a
// later Create gives the login back. A role that is gone is no error; one the record does not
// give this provider is refused and left as it is.
func (b *Backend) Remove(ctx context.Context, as string) error {
	return b.withdrawThen(ctx, as, markWithdrawn, forWithdrawal, func(context.Context, *pgxpool.Conn, powers, record, observed) error { return nil })
}

// marking is whether a withdrawal marks the record withdrawn: Remove does; Drop does not, so
// that a drop cut short leaves the record as it was and the next pass drops again.
type marking bool

const (
	markWithdrawn marking = true
	keepRecord    marking = false
)

// withdrawThen takes the login as, under its lock (marking its record withdrawn as mark
// says), and where the role exists, ends its sessions and runs then with the powers it acts
// under, its record and the role as read (what reads asks for), still under the lock.
func (b *Backend) withdrawThen(ctx context.Context, as string, mark marking, reads reading, then func(context.Context, *pgxpool.Conn, powers, record, observed) error) error {
	if err := b.rules.checkName("login", as); err != nil {
		return err
	}
	p := b.stance().powers // one reading of the mode for the whole withdrawal
	err := b.locks.locked(ctx, as, p, func(ctx context.Context, conn *pgxpool.Conn) error {
		r, f, err := b.withdrawLogin(ctx, conn, p, as, mark, reads)
		if err != nil || !f.role {
			return err
		}
		if err := endSessions(ctx, conn, b.voice, b.self, as); err != nil {
			return err
		}
		return then(ctx, conn, p, r, f)
	})
	if err == nil {
		b.ext.forget(as) // what was said of it once is the loop's to forget (domain.Told)
	}
	return err
}

// Drop removes everything the provider made for the login as, and nothing else, in an order
// that finishes: the login first (so nobody works on while it goes), then the databases its
// record names, then the privileges it was granted elsewhere, then the role, and its record
// with it. What stops a drop is said, and nothing is dropped: a database the role owns that
// the provider did not make for it, or objects it owns (or policies naming it) in any other
// database, which may be somebody else's (an operator's ALTER ... OWNER TO) and are never
// dropped with it, nor handed to the provider (a function of the consumer's owned by a
// superuser would run as one). A role that is gone is no error; one the record does not give
// this provider is refused and left as it is.
func (b *Backend) Drop(ctx context.Context, as string) error {
	// The record is not marked withdrawn first: a Drop cut short leaves it as it was, and the
	// next pass withdraws, and drops, again.
	return b.withdrawThen(ctx, as, keepRecord, forDrop, func(ctx context.Context, conn *pgxpool.Conn, p powers, r record, h observed) error {
		asMember := p.asMember
		mine := r.databases(as)
		if len(mine) == 0 {
			return fmt.Errorf("drop %s: its record names no database", as)
		}
		ours := func(db string) bool { return slices.Contains(mine, db) }
		if others := slices.DeleteFunc(slices.Clone(h.owns), ours); len(others) > 0 {
			return refused(fmt.Errorf("role %s also owns %s, which the provider did not make for it; not dropped: give %s another "+
				"owner (ALTER DATABASE ... OWNER TO) or drop %s", as,
				joined(others), itOrThem(len(others)), itOrThem(len(others))))
		}
		if elsewhere := slices.DeleteFunc(slices.Clone(h.ownsIn), ours); len(elsewhere) > 0 {
			places := make([]string, len(elsewhere))
			for i, db := range elsewhere {
				places[i] = where(db)
			}
			return refused(fmt.Errorf("role %s owns objects in %s, where the provider made nothing for it; not dropped: drop them "+
				"or give them another owner there (REASSIGN OWNED BY %s TO ...)",
				as, joined(places), as))
		}
		if b.archives != nil { // nothing is dropped before it is archived
			if err := b.archives.archivedFirst(ctx, conn, as, r, h.owns); err != nil {
				return err
			}
		}
		for _, db := range h.owns {
			if err := dropDatabase(ctx, conn, db, as, asMember); err != nil {
				return fmt.Errorf("drop database %s: %w", db, err)
			}
		}
		// Elsewhere it owns nothing: DROP OWNED there only revokes what it was granted. Here (the
		// pool's database) it also revokes its privileges on shared objects ("").
		revokeHere := false
		for _, db := range slices.DeleteFunc(slices.Clone(h.grantedIn), ours) {
			if db == "" || db == b.home {
				revokeHere = true
				continue
			}
			if err := dropOwnedIn(ctx, &b.conns, db, as, asMember); err != nil {
				return err
			}
		}
		if revokeHere {
			if err := asOwner(ctx, conn, as, asMember, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, "DROP OWNED BY "+ident(as))
				return err
			}); err != nil {
				return fmt.Errorf("revoke what %s was granted: %w", as, err)
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
// in one transaction, under the powers p. It answers the role's record, and the role as read
// (reads: whether it exists, and what a drop weighs besides).
func (b *Backend) withdrawLogin(ctx context.Context, conn *pgxpool.Conn, p powers, as string, mark marking, reads reading) (record, observed, error) {
	var (
		f observed
		r record
	)
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) (err error) {
		if f, err = observe(ctx, tx, p, as, "", reads); err != nil || !f.role {
			return err
		}
		r, err = recordOf(as, b.resource, f.comment)
		if errors.Is(err, errNotRecorded) {
			return refused(fmt.Errorf("role %s is not in the record of what the provider manages; it is not withdrawn", as))
		}
		if err != nil {
			return err
		}
		// Its sessions end first: one of them may hold the role's row (a consumer may alter its
		// own role in an open transaction), and NOLOGIN would wait for it to its lock_timeout,
		// every pass. Those that log in meanwhile are ended after.
		if err := endSessions(ctx, tx, b.voice, b.self, as); err != nil {
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
		return record{}, observed{}, fmt.Errorf("withdraw login %s: %w", as, err)
	}
	return r, f, nil
}

// dropOwnedIn drops what role owns in db, on a connection of conns, and revokes what it was
// granted there; Drop calls it only where the role owns nothing. asMember is whether the provider acts as the owner through
// a membership (powers).
func dropOwnedIn(ctx context.Context, conns *databaseConns, db, role string, asMember bool) error {
	conn, err := conns.open(ctx, db, false)
	if err != nil {
		return fmt.Errorf("drop what %s owns in %s: %w", role, db, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := asOwner(ctx, conn, role, asMember, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "DROP OWNED BY "+ident(role))
		return err
	}); err != nil {
		return fmt.Errorf("drop what %s owns in %s: %w", role, db, err)
	}
	return nil
}

// dropDatabase drops db, owned by role, ending the sessions in it. A provider that is not a
// superuser (asMember: it acts through a membership) drops it as its owner (dropAsOwner).
func dropDatabase(ctx context.Context, conn *pgxpool.Conn, db, role string, asMember bool) error {
	if !asMember {
		_, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(db)+" WITH (FORCE)")
		return err
	}
	err := dropAsOwner(ctx, conn, db, role, " WITH (FORCE)")
	if pgCode(err) == insufficientPrivilege {
		// FORCE ends every other session in it first, and the owner may not end one that is
		// not its own, such as an autovacuum worker that has just started on the new database
		// (a superuser's process to anyone else). Without FORCE the server signals autovacuum
		// and waits for it; the consumer's own sessions were ended at its withdrawal.
		err = dropAsOwner(ctx, conn, db, role, "")
	}
	return err
}

// dropAsOwner drops db as its owner role, with the DROP DATABASE option with (" WITH (FORCE)"
// or ""): the provider's own sessions there (a check's, an extension's, closing) are ended and
// waited for first, since the owner may end only its own. DROP DATABASE takes no transaction,
// so the role is set on the session and reset after; a session that cannot be reset is closed,
// never pooled as the consumer.
func dropAsOwner(ctx context.Context, conn *pgxpool.Conn, db, role, with string) error {
	if err := endOwnSessions(ctx, conn, db); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "SET ROLE "+ident(role)); err != nil {
		return fmt.Errorf("act as the owner %s: %w", role, err)
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), "RESET ROLE"); err != nil {
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	_, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(db)+with)
	return err
}

// itOrThem is "it" for one, "them" for more.
func itOrThem(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}
