// The verdict on a consumer: what Create may do with it, decided once, without the server,
// from one observation of it (observe.go), its definition and how the provider stands. Create
// acts on it and Foresee says it, so that a plan never refuses what a pass would make, nor
// the other way round; each refusal is written here, and nowhere else.

package postgres

import (
	"errors"
	"fmt"

	"github.com/novox/postgres-provider/ports"
)

// stance is how the provider stands on the server, as far as a verdict, and the writing of
// it, turn on it: its mode's powers, whether it takes over a plain role it did not make
// (adopt), and its own role. A create, a withdrawal, a record's rewrite and a check batch take
// it once (the only readings of the mode but the loop's ChecksByLogin), and decide, compare and
// write under it.
type stance struct {
	powers
	adopt Adopt
	self  string // the provider's role, named in a refusal that a grant to it would lift
}

// stance is how the provider stands now, as last read from the server.
func (b *Backend) stance() stance { return stance{powers: b.powers(), adopt: b.adopt, self: b.self} }

// verdict is what Create does with a consumer: make its role (ActCreate), take over a role it
// did not make (ActAdopt), keep the role it holds (ActNone: what differs is then repaired), or
// refuse it (ActRefuse) for the reason refusal gives, in the words Create and Foresee both say.
type verdict struct {
	act     ports.Act
	had     record // the provider's record on the role, where it holds one
	refusal error
	// changes are how the consumer differs from its definition (definition.changes, the check's
	// own comparison), as the provider's mode has it make them: what Create writes of its role,
	// its database and its settings there. The record and the extensions are their own steps'.
	changes []change
}

// decide is the verdict on the consumer d, observed as o (read with reading.claim, its password
// checked: o.verifies), for a provider standing as s, where vet is the server's refusal of d's
// settings (vetSettings), nil where it took them. Its rules, in the order they are asked:
//   - a database another consumer of the provider's has is never given to a second one;
//   - settings the server refuses are refused before anything is made;
//   - a role the provider renamed away is that consumer, never made again beside it;
//   - a role in no record is taken over only where adoption is on, it is exactly what the
//     provider would have made, and (delegated, from 16) the provider administers it;
//   - a role recorded by another provider, or whose record is not this role's, is refused;
//   - a database another role owns is never handed over.
func (d definition) decide(o observed, s stance, vet error) verdict {
	if err := d.anothers(o); err != nil {
		return refuse(atDatabase(d.database, err))
	}
	if vet != nil {
		return refuse(settingsError(d.role, d.database, vet))
	}
	v := verdict{act: ports.ActCreate}
	if o.role {
		v = d.claim(o, s)
	} else if other := d.renamedTo(o); other != "" {
		v.act, v.refusal = ports.ActRefuse, refused(fmt.Errorf("%s is now the role %s (renamed; %s carries the provider's record of %s); it is "+
			"not made again beside it: rename it back (ALTER ROLE %s RENAME TO %s), or take the record off %s (COMMENT ON ROLE %s "+
			"IS NULL) to have %s made anew", d.role, other, other, d.role, ident(other), ident(d.role), other, ident(other), d.role))
	}
	if v.refusal != nil {
		return refuse(atRole(d.role, v.refusal))
	}
	if err := d.handedOver(o); err != nil {
		return refuse(atDatabase(d.database, err))
	}
	v.changes = d.changes(o, s.powers)
	return v
}

// claim is the verdict on a role that exists: the provider's (its record, on this very role,
// says so), one adoption takes over, or one refused, unwrapped.
func (d definition) claim(o observed, s stance) verdict {
	had, err := recordOf(d.role, d.resource, o.comment)
	switch {
	case errors.Is(err, errNotRecorded) && s.adopt == AdoptNone:
		err = refused(fmt.Errorf("role %s exists and the provider did not make it; it is not taken over (adoption is off)", d.role))
	case errors.Is(err, errNotRecorded):
		if why := unadoptable(o, d.database); why != "" {
			err = refused(fmt.Errorf("role %s exists, the provider did not make it, and it is %s; it is not taken over", d.role, why))
		} else if s.adoptsAdministered && !o.admin {
			err = refused(fmt.Errorf("role %s exists, the provider did not make it, and the provider's role %s has no ADMIN option on it "+
				"(from PostgreSQL 16 a role that is not a superuser alters only the roles it administers); it is not taken over: to have "+
				"it adopted, as a superuser: GRANT %s TO %s WITH ADMIN OPTION, INHERIT FALSE, SET FALSE", d.role, s.self, ident(d.role), ident(s.self)))
		} else {
			return verdict{act: ports.ActAdopt}
		}
	}
	if err != nil {
		return verdict{act: ports.ActRefuse, refusal: err}
	}
	return verdict{act: ports.ActNone, had: had}
}

// renamedTo is the role, not d's, that carries this provider's record of d's login (d's role
// was renamed to it, or the record copied there), "" where none does.
func (d definition) renamedTo(o observed) string {
	for i, name := range o.others {
		if r, ok := parseRecord(&o.otherComments[i]); ok && r.Resource == d.resource && r.Login == d.role && r.V <= recordVersion {
			return name
		}
	}
	return ""
}

// anothers refuses, unwrapped, a database that another consumer of the provider's has (its
// owner's record is the provider's, on that very role): asked before anything of the consumer
// is made, so that no role is made for a consumer whose database is another's.
func (d definition) anothers(o observed) error {
	if !o.database || o.owner == d.role {
		return nil
	}
	if r, ok := parseRecord(o.ownerComment); ok && r.Resource == d.resource && foreign(o.owner, r) == "" {
		return hasIt(o.owner)
	}
	return nil
}

// hasIt is the refusal of a database that the consumer as has: the same words whether it was
// made in an earlier pass (definition.anothers) or both ask for it in one (Clashes).
func hasIt(as string) error {
	return refused(fmt.Errorf("consumer %s has it; one database is never given to two consumers", as))
}

// handedOver refuses, unwrapped, a database that exists and another role owns: Create never
// hands one over, whether it found it so or a concurrent CREATE DATABASE made it so.
func (d definition) handedOver(o observed) error {
	if err := d.anothers(o); err != nil {
		return err
	}
	if o.database && o.owner != d.role {
		return refused(fmt.Errorf("the database exists and is owned by %q, not %q; it is not handed over", o.owner, d.role))
	}
	return nil
}

// refuse is the verdict that refuses for err.
func refuse(err error) verdict { return verdict{act: ports.ActRefuse, refusal: err} }

// atRole and atDatabase are an error of Create's about the consumer's role, or its database,
// as Create, Foresee and the loop say it.
func atRole(role string, err error) error   { return fmt.Errorf("create role %s: %w", role, err) }
func atDatabase(db string, err error) error { return fmt.Errorf("create database %s: %w", db, err) }

// atExtension is an error of Create's about the extension name in the consumer's database db.
func atExtension(name, db string, err error) error {
	return fmt.Errorf("create extension %s in %s: %w", name, db, err)
}

// settingsError is an error of the settings of role in db, as Create and Foresee say it.
func settingsError(role, db string, err error) error {
	return fmt.Errorf("settings of %s in %s: %w", role, db, err)
}
