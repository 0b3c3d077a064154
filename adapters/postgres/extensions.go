// A consumer's extensions, in the provider's schema of its database, with the role's
// search_path set to find them.

package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/novox/postgres-provider/ports"
)

// The consumer owns its database, and so its public schema: whatever the provider runs there
// as a superuser must not resolve a name to an object the consumer made. Extensions therefore
// go into a schema of the provider's, which the consumer may use but not create in, and their
// scripts run with that schema (and the catalog) as their search path. The consumer's role has
// the schema on its search path in its database, so that `vector` resolves unqualified.

// extensionSchema is the schema the provider creates extensions in, in each consumer's database.
const extensionSchema = "extensions"

// consumerSearchPath is the consumer's role's search_path in its database: its own schema and
// public first, as PostgreSQL's default, then the extensions.
const consumerSearchPath = `"$user", public, ` + extensionSchema

// extensionPath is how a consumer's extensions are made, kept current and refused: what it
// may have, what the server offers (kept between creates), and what the server refused each
// consumer. Its facts are told through voice. It is safe for concurrent use.
type extensionPath struct {
	allowed []string // nil: every available extension
	self    string   // the provider's own role: the schema it owns is the provider's
	conns   *databaseConns
	// offered is what the server offers of every extension, kept from one create to the next
	// while the server's list of them has not changed.
	offered offeredCache
	// refusedExt are the consumers' extensions ("role/name") the server refused to create for a
	// provider that is not a superuser, and the server's message: not checked for, as those it
	// does not have, and lacked (Holding.Lacks).
	refusedExt sync.Map
	// refusedUpdate are the consumers' extension updates ("role/key") the server refused to
	// make for a provider that is not a superuser, and why: said once, not tried again.
	refusedUpdate sync.Map
}

// forget lets go of what is remembered of the consumer as, once it is withdrawn or dropped:
// the extensions and updates the server refused it. Listed again, it is asked of the server
// anew.
func (xp *extensionPath) forget(as string) {
	prefix := as + "/"
	for _, m := range []*sync.Map{&xp.refusedExt, &xp.refusedUpdate} {
		m.Range(func(k, _ any) bool {
			if strings.HasPrefix(k.(string), prefix) {
				m.Delete(k)
			}
			return true
		})
	}
}

// allows is whether consumers may have the extension name (--allow-extensions).
func (xp *extensionPath) allows(name string) bool {
	return xp.allowed == nil || slices.Contains(xp.allowed, name)
}

// extension is what the server has of an extension a consumer names.
type extension struct {
	name string
	// schema is the schema its control file fixes, "" where it is relocatable or leaves it to
	// CREATE EXTENSION.
	schema string
	// version is the server's default version of it.
	version string
}

// extension is the extension name as a create makes it from what the server offers of it (o):
// in the schema its default version's control file fixes, at that version unless pinned. A
// create and a plan's weighing of it (refusedMaking) take it from here alike.
func (o offered) extension(name string) extension {
	return extension{name: name, schema: o.schemas[o.def], version: o.def}
}

// The words of what a consumer lacks (ports.Holding.Lacks): an extension it names that the
// provider does not make for it, and why.
const (
	lackNotAllowed   = "not allowed on this server (--allow-extensions)"
	lackNotAvailable = "not available on this server"
	lackRefused      = "refused by the server"
)

// lack is the words of the extension name lacked for why.
func lack(name, why string) string { return "extension " + name + ": " + why }

// barred is why no consumer has the extension name made here, "" where one may: not allowed
// here (--allow-extensions), or not available on this server (available says whether it is).
// A create skips it, saying so, and a check does not look for it.
func (xp *extensionPath) barred(name string, available bool) string {
	switch {
	case !xp.allows(name):
		return lackNotAllowed
	case !available:
		return lackNotAvailable
	}
	return ""
}

// lacking is why the provider does not make the extension name for role, "" where it does:
// barred, or refused by the server when it was last created.
func (xp *extensionPath) lacking(role, name string, available bool) string {
	if why := xp.barred(name, available); why != "" {
		return why
	}
	if why, refused := xp.refusedExt.Load(role + "/" + name); refused {
		return lackRefused + " (" + why.(string) + ")"
	}
	return ""
}

// extensionsToCreate answers which of w's extensions are to be created, and what w lacks (in
// Holding.Lacks' words), and adds to told, to be said once per consumer and extension until
// that changes, those that are not: barred (as offer has what is available).
func (xp *extensionPath) extensionsToCreate(ctx context.Context, offer *offerings, w wanted, told *facts) ([]extension, []string, error) {
	if len(w.extensions) == 0 {
		return nil, nil, nil
	}
	all, err := offer.catalog(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list available extensions: %w", err)
	}
	var out []extension
	var lacks []string
	for _, name := range w.extensions {
		key := sayKey{w.role, extensionSkipped, name}
		o, available := all[name]
		if why := xp.barred(name, available); why != "" {
			lacks = append(lacks, lack(name, why))
			told.holds(key, why, "%s: extension %s is %s; skipped", w.role, name, why)
			continue
		}
		told.over(key)
		out = append(out, o.extension(name))
	}
	return out, lacks, nil
}

// ensureExtensions creates, in the consumer's database and as the provider, each extension it
// names that is wanted, with what it depends on, in the provider's schema (or the one its
// control file fixes, where that is not one the consumer can write), and gives the consumer's
// role that schema on its search path there. An extension already installed stays where it
// is; one the consumer can tamper with because it is in public is told once (what it found to
// be said it adds to told). It answers whether it created or updated an extension or set the
// search path, and what the consumer lacks (Holding.Lacks). One installed at another version
// than wanted is updated only where its key is among updates (the loop stages them), and where
// the update fails, the error is a *ports.UpdateFailed, after the rest was done. searchPath is
// whether Create found the role's search path there already the provider's; p are the powers
// the create acts under. What is inside the database is read once, before anything is made
// there, as a check reads it (readInside), and what to do there decided from that read
// (inside.verdict); only a create that made others (CASCADE) reads where they went, and an
// update weighed after creates reads again what they left.
func (xp *extensionPath) ensureExtensions(ctx context.Context, conn *pgxpool.Conn, w wanted, p powers, updates []string, searchPath bool, told *facts) (changed bool, lacks []string, err error) {
	offer := newOfferings(conn) // what the server has of each: kept from the last create while its stamp holds
	offer.kept, offer.named = &xp.offered, w.extensions
	want, lacks, err := xp.extensionsToCreate(ctx, offer, w, told)
	if err != nil || len(want) == 0 {
		return false, lacks, err
	}
	db, err := xp.conns.open(ctx, w.database, false)
	if err != nil {
		return changed, lacks, inExtensions(w.database, err)
	}
	defer db.Close(context.WithoutCancel(ctx))
	var asks insideAsks
	if len(updates) > 0 { // the versions installed: nothing but a staged update weighs them
		for _, x := range want {
			asks.names, asks.wants = append(asks.names, x.name), append(asks.wants, w.want(x.name, x.version))
		}
	}
	seen, err := readInside(ctx, db.Conn, w.role, asks, offer)
	if err != nil {
		return changed, lacks, inExtensions(w.database, err)
	}
	v := seen.verdict(w.database, want, p.schemaOwner, searchPath)
	if v.refusal != nil {
		return changed, lacks, v.refusal
	}
	if v.schema {
		if err := writeSchema(ctx, db.Conn, w.role, seen.schema.owner == nil); err != nil {
			return changed, lacks, inExtensions(w.database, err)
		}
	}
	present := maps.Clone(seen.present) // what is installed as each create leaves it (requiredIn)
	if present == nil {
		present = map[string]string{}
	}
	for _, a := range v.each {
		x := a.x
		if a.installed {
			if a.in == "public" {
				told.holds(sayKey{w.role, extensionInPublic, x.name}, "public", "%s: extension %s is "+
					"installed in schema public of %s, where the consumer can write; it stays there (drop it to have it "+
					"made again in %s)", w.role, x.name, w.database, extensionSchema)
			}
			continue
		}
		made, cascaded, err := xp.createExtension(ctx, db.Conn, w, x, offer, present, p.refusable, told)
		if err != nil {
			return changed, lacks, atExtension(x.name, w.database, err)
		}
		if cascaded { // it made others, wherever their control files put them: read where
			if err := readInstalled(ctx, db.Conn, present); err != nil {
				return changed, lacks, fmt.Errorf("list extensions in %s: %w", w.database, err)
			}
		} else if made {
			present[x.name] = cmp.Or(x.schema, extensionSchema)
		}
		if why := xp.lacking(w.role, x.name, true); why != "" {
			lacks = append(lacks, lack(x.name, why))
		}
		changed = changed || made
	}
	var failed error
	if v.weigh && len(updates) > 0 {
		named := seen.named
		if changed {
			// What the creates made, and made others (CASCADE), wherever their control files put
			// them, is installed now: an update's script searches the schemas of what its version
			// requires, so they are read again before any is judged.
			again, err := readInside(ctx, db.Conn, w.role, asks, offer)
			if err != nil {
				return changed, lacks, fmt.Errorf("list extensions in %s: %w", w.database, err)
			}
			named = again.named
		}
		updated, err := xp.updateExtensions(ctx, db.Conn, w.role, named, updates, p.refusable, told)
		changed = changed || updated
		if !errors.As(err, new(*ports.UpdateFailed)) && err != nil {
			return changed, lacks, fmt.Errorf("update extensions in %s: %w", w.database, err)
		}
		failed = err
	}
	if v.searchPath {
		if err := writeSearchPath(ctx, conn, w); err != nil {
			return true, lacks, err
		}
	}
	return changed || v.searchPath, lacks, failed
}

// createExtension creates x in the consumer's database db, as the provider, in the provider's
// schema (or the one its control file fixes, where that is not one the consumer can write) at
// the version pinned, else the default; it answers whether it created it. One the server does
// not let a provider that is not a superuser create is said once and skipped (refusable, its
// powers). offer is what the server has of it, and present what is installed; it answers
// whether the create made others (cascaded). What it found to be said is added to told. Its
// errors are about x, unwrapped.
func (xp *extensionPath) createExtension(ctx context.Context, db *pgx.Conn, w wanted, x extension, offer *offerings, present map[string]string, refusable bool, told *facts) (made, cascaded bool, err error) {
	at := x.version
	if pin := w.pins[x.name]; pin != "" {
		if ok, err := offers(ctx, offer, w.role, x.name, pin, told); err != nil || !ok {
			return false, false, err // nil where it was said and skipped
		}
		at = pin
	}
	all, err := offer.catalog(ctx)
	if err != nil {
		return false, false, err
	}
	statement, cascades, err := extensionSQL(all, present, x, at)
	if err != nil {
		return false, false, err
	}
	if _, err := db.Exec(ctx, statement); err != nil {
		if refusable && pgCode(err) == insufficientPrivilege {
			// The server does not let a provider that is not a superuser create it (not
			// trusted, not on the platform's allow-list): said once, and the rest go on.
			told.holds(sayKey{w.role, extensionRefused, x.name}, pgMessage(err),
				"%s: extension %s is refused by the server (%s); skipped", w.role, x.name, pgMessage(err))
			xp.refusedExt.Store(w.role+"/"+x.name, pgMessage(err))
			return false, false, nil
		}
		return false, false, err
	}
	xp.refusedExt.Delete(w.role + "/" + x.name)
	told.over(sayKey{w.role, extensionRefused, x.name})
	return true, cascades, nil
}

// refusedMaking is Create's refusal, in its words, of the first extension of named (a check's
// read of those it names, in their order) that is not installed, that the server has at the
// version wanted, and that Create would refuse to make in the consumer's database db where
// present is installed (extensionSQL); nil where it would refuse none. all is what the server
// offers, asked only where one is to be made. A plan says it (Foresee) as a pass would.
func refusedMaking(ctx context.Context, all func(context.Context) (map[string]offered, error), db string, named []installed, present map[string]string) error {
	for _, x := range named {
		if x.version != "" || !x.known {
			continue // installed, or pinned at a version the server lacks (an update refused)
		}
		offer, err := all(ctx)
		if err != nil {
			return err
		}
		if _, _, err := extensionSQL(offer, present, offer[x.name].extension(x.name), x.want); err != nil {
			return atExtension(x.name, db, err)
		}
	}
	return nil
}

// offers is whether the server has version of the extension name (as offer read it), adding to
// told, to be said once, where it has not: the pin is refused for that extension, the others
// go on.
func offers(ctx context.Context, offer *offerings, role, name, version string, told *facts) (bool, error) {
	o, err := offer.of(ctx, name)
	if err == nil && !slices.Contains(o.versions, version) { // a version the kept read did not list: asked of the server now
		var fresh bool
		if fresh, err = offer.fresh(ctx); err == nil && !fresh {
			o, err = offer.of(ctx, name)
		}
	}
	if ok := slices.Contains(o.versions, version); err != nil || ok {
		told.over(sayKey{role, extensionPin, name})
		return ok, err
	}
	told.holds(sayKey{role, extensionPin, name}, version,
		"%s: extension %s is pinned at %s, which this server does not have (it has %s); skipped", role, name, version,
		strings.Join(o.versions, ", "))
	return false, nil
}

// writeSchema makes the provider's schema in the connected database (create), or writes its
// privileges again: the consumer's role may use it, and nobody but its owner create in it.
// Whether it is written at all, or refused as another's, is the inside verdict's.
func writeSchema(ctx context.Context, db *pgx.Conn, role string, create bool) error {
	statements := ""
	if create {
		statements = "CREATE SCHEMA " + ident(extensionSchema) + "; " // one round trip with its privileges
	}
	_, err := db.Exec(ctx, statements+"REVOKE ALL ON SCHEMA "+ident(extensionSchema)+" FROM PUBLIC; "+
		"REVOKE CREATE ON SCHEMA "+ident(extensionSchema)+" FROM "+ident(role)+"; "+
		"GRANT USAGE ON SCHEMA "+ident(extensionSchema)+" TO "+ident(role))
	return err
}

// writeSearchPath sets the consumer's role's search_path in its database to the one the
// provider gives it (consumerSearchPath).
func writeSearchPath(ctx context.Context, conn *pgxpool.Conn, w wanted) error {
	_, err := conn.Exec(ctx, "ALTER ROLE "+ident(w.role)+" IN DATABASE "+ident(w.database)+" SET search_path = "+consumerSearchPath)
	return err
}
