// The verdict on a consumer: what Create may do with it, decided once, without the server,
// from one observation of it (observe.go), its definition and how the provider stands. Create
// acts on it and Foresee says it, so that a plan never refuses what a pass would make, nor
// the other way round; each refusal is written here, and nowhere else.

package postgres

import (
	"errors"
	"fmt"
	"slices"
	"strings"

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
	// its database and its settings there. The extensions are their own step's.
	changes []change
	// record is the record Create writes on the role (definition.record), nil where the role
	// carries it already: one it makes or adopts always gets it.
	record *record
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
	if want := d.record(v.had, o.owns); v.act == ports.ActAdopt || !sameRecord(v.had, want) {
		v.record = &want
	}
	return v
}

// claim is the verdict on a role that exists: the provider's (its record, on this very role,
// says so), one adoption takes over, or one refused, unwrapped. Only the adoption's rules weigh
// what the role holds (adopting, weighsHoldings).
func (d definition) claim(o observed, s stance) verdict {
	had, err := recordOf(d.role, d.resource, o.comment)
	switch {
	case adopting(err, s):
		if why := unadoptable(o, d.database); why != "" {
			err = refused(fmt.Errorf("role %s exists, the provider did not make it, and it is %s; it is not taken over", d.role, why))
		} else if s.adoptsAdministered && !o.admin {
			err = refused(fmt.Errorf("role %s exists, the provider did not make it, and the provider's role %s has no ADMIN option on it "+
				"(from PostgreSQL 16 a role that is not a superuser alters only the roles it administers); it is not taken over: to have "+
				"it adopted, as a superuser: GRANT %s TO %s WITH ADMIN OPTION, INHERIT FALSE, SET FALSE", d.role, s.self, ident(d.role), ident(s.self)))
		} else {
			return verdict{act: ports.ActAdopt}
		}
	case errors.Is(err, errNotRecorded):
		err = refused(fmt.Errorf("role %s exists and the provider did not make it; it is not taken over (adoption is off)", d.role))
	}
	if err != nil {
		return verdict{act: ports.ActRefuse, refusal: err}
	}
	return verdict{act: ports.ActNone, had: had}
}

// weighsHoldings is whether the verdict on d, observed as o by a provider standing as s, weighs
// what the role holds across the cluster (observed.owns, ownsIn, grantedIn): only where it may
// adopt the role (adopting, where claim takes the adoption's path, unadoptable). The record
// Create writes names the databases the role owns too, which a plan does not say.
func (d definition) weighsHoldings(o observed, s stance) bool {
	if !o.role {
		return false
	}
	_, err := recordOf(d.role, d.resource, o.comment)
	return adopting(err, s)
}

// adopting is whether a role that exists, whose record read as err (recordOf), is one the
// provider may adopt, standing as s: in no record of the provider's, while adoption is on.
func adopting(err error, s stance) bool {
	return errors.Is(err, errNotRecorded) && s.adopt != AdoptNone
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

// insideVerdict is what a create does inside a consumer's database, decided once, without
// the server, from one read of what is there (readInside): refuse, where the provider's schema
// there is another's; otherwise write the schema where it is not as the provider writes it,
// take each extension of the entry's that the provider makes, in the entry's order, as made or
// to make, weigh a staged update where one of them is installed, and give the role its
// search_path where it lacks it.
type insideVerdict struct {
	refusal    error
	schema     bool // the schema made, or its privileges written again
	each       []insideAct
	weigh      bool // one of them is installed: a staged update is weighed
	searchPath bool // the role's search_path there is written
}

// insideAct is what a create does of one extension the consumer names: make it, or leave it
// where it is installed (in; the consumer can write in public, which is told).
type insideAct struct {
	x         extension
	installed bool
	in        string
}

// verdict is the inside verdict on a consumer's database db read as in, for the extensions want
// (those of its entry that the provider makes), where mustOwn is who must own the provider's
// schema, in a refusal's words (powers.schemaOwner), and hasSearchPath whether the role's
// search_path there is already the provider's (observed.searchPath). It is pure: table tests.
func (in inside) verdict(db string, want []extension, mustOwn string, hasSearchPath bool) insideVerdict {
	if err := in.refusal(db, mustOwn); err != nil {
		return insideVerdict{refusal: err}
	}
	v := insideVerdict{schema: in.schema.toWrite(), searchPath: !hasSearchPath}
	for _, x := range want {
		at, installed := in.present[x.name]
		v.each = append(v.each, insideAct{x: x, installed: installed, in: at})
		v.weigh = v.weigh || installed
	}
	return v
}

// refusal is why nothing is made inside the consumer's database db read as in, nil where
// something may be: the provider's schema there is another's (one the consumer may have made,
// to plant objects in it), where mustOwn must own it. A create refuses it (inside.verdict), and
// a plan says so (Foresee), in the same words; a check finds the schema drifted (schemaSeen.safe).
func (in inside) refusal(db, mustOwn string) error {
	if s := in.schema; s.ownedByAnother() {
		return inExtensions(db, refused(fmt.Errorf("schema %s exists and is owned by %s, not by %s: extensions are not "+
			"created where others may create objects", extensionSchema, *s.owner, mustOwn)))
	}
	return nil
}

// extensionSQL is the statement that creates x at version at ("" for the server's default) in a
// database where present is installed (by name, in its schema), as the provider, in its schema
// or in the one x's control file fixes, and whether it would create others (CASCADE); or why it
// is refused: a script run as a superuser never searches a schema others may create objects in.
// The version judged is the one named, so that what is made is what was judged. It is pure:
// table tests.
func extensionSQL(all map[string]offered, present map[string]string, x extension, at string) (statement string, cascades bool, err error) {
	where, cascades := requiredIn(all, present, x.name, at)
	if len(where) > 0 {
		return "", false, refused(fmt.Errorf("it requires an extension installed, or made by CASCADE, in schema %s, where others may create objects; its "+
			"script would run as a superuser searching that schema, so it is not created", strings.Join(where, ", ")))
	}
	version := ""
	if at != "" {
		version = " VERSION " + literal(at)
	}
	switch x.schema {
	case "":
		return "CREATE EXTENSION IF NOT EXISTS " + ident(x.name) + " SCHEMA " + ident(extensionSchema) + version + " CASCADE", cascades, nil
	case "pg_catalog", extensionSchema:
		return "CREATE EXTENSION IF NOT EXISTS " + ident(x.name) + version + " CASCADE", cascades, nil
	}
	return "", false, refused(fmt.Errorf("its control file puts it in schema %s, which the provider does not own; its script would "+
		"run as a superuser where the consumer may have planted objects, so it is not created", x.schema))
}

// requiredIn names the schemas, other than the catalog and the provider's, of the extensions
// installed (by name, in their schemas) that creating name at version requires, directly or
// through those CASCADE would create at their default versions, and the schemas the control
// files of those CASCADE would create fix for them: PostgreSQL puts each required extension's
// schema on the search_path of the script of the one that requires it, and runs a cascaded
// one's script in the schema its control file fixes, each as a superuser. It answers them
// sorted, and whether the create would cascade (make others). It is pure: table tests.
func requiredIn(all map[string]offered, installed map[string]string, name, version string) (schemas []string, cascades bool) {
	seen := map[string]bool{}
	next := slices.Clone(all[name].requires[version])
	for len(next) > 0 {
		r := next[0]
		next = next[1:]
		if seen[r] {
			continue
		}
		seen[r] = true
		if schema, ok := installed[r]; ok {
			if schema != "pg_catalog" && schema != extensionSchema {
				schemas = append(schemas, schema)
			}
			continue
		}
		cascades = true
		if o, ok := all[r]; ok {
			if fixed := o.schemas[o.def]; fixed != "" && fixed != "pg_catalog" && fixed != extensionSchema {
				schemas = append(schemas, fixed) // CASCADE makes it there, in a schema the provider does not own
			}
			next = append(next, o.requires[o.def]...)
		}
	}
	slices.Sort(schemas)
	return slices.Compact(schemas), cascades
}

// refuse is the verdict that refuses for err.
func refuse(err error) verdict { return verdict{act: ports.ActRefuse, refusal: err} }

// atRole and atDatabase are an error of Create's about the consumer's role, or its database,
// as Create, Foresee and the loop say it.
func atRole(role string, err error) error   { return fmt.Errorf("create role %s: %w", role, err) }
func atDatabase(db string, err error) error { return fmt.Errorf("create database %s: %w", db, err) }

// inExtensions is an error of Create's about the extensions of the consumer's database db as a
// whole (its schema, a connection there), as Create and Foresee say it.
func inExtensions(db string, err error) error {
	return fmt.Errorf("create extensions in %s: %w", db, err)
}

// atExtension is an error of Create's about the extension name in the consumer's database db.
func atExtension(name, db string, err error) error {
	return fmt.Errorf("create extension %s in %s: %w", name, db, err)
}

// settingsError is an error of the settings of role in db, as Create and Foresee say it.
func settingsError(role, db string, err error) error {
	return fmt.Errorf("settings of %s in %s: %w", role, db, err)
}
