// Extensions' versions: the pins an entry names, what a check observed of each installed
// extension against the version wanted, and the update that brings it there.

package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/novox/postgres-provider/ports"
)

// want is the version w wants of the extension name, given the server's default version.
func (w wanted) want(name, serverDefault string) string {
	if v := w.pins[name]; v != "" {
		return v
	}
	return serverDefault
}

// updateKey names the update of an extension to a version alike for every consumer: what the
// loop stages a rollout over.
func updateKey(name, to string) string { return "extension " + name + " -> " + to }

// installed is what a check observed of one extension a consumer names, in its database.
type installed struct {
	name, version, want string // version is "" where it is not installed
	// Where version is not want: whether the server has want at all, an update path from
	// version to want, and one from want to version (want is older), and the versions it has.
	known, path, back bool
	offer             string
	// unsafe names the schemas other than the catalog and the provider's that an update's
	// script would search (the extension's own and those of the extensions it requires, which
	// PostgreSQL puts on the script's search_path): where the consumer may create objects.
	unsafe string
}

// change is what the provider does about an installed extension: nothing (held, or missing,
// which is drift of its own), or an update, which may be refused. It is pure: table tests.
func (x installed) change() (u ports.Update, due bool) {
	switch {
	case x.version == x.want, x.version == "" && x.known:
		return ports.Update{}, false
	case x.version == "":
		// Pinned at a version the server does not have: Create skips it, so it is not missing.
		return ports.Update{Key: updateKey(x.name, x.want), Subject: "extension " + x.name, To: x.want, Word: fmt.Sprintf("extension %s missing, wanted %s", x.name, x.want),
			Step: fmt.Sprintf("create %s %s", x.name, x.want), Offer: x.offer,
			Refused: fmt.Sprintf("the server has no version %s of %s (it has %s)", x.want, x.name, x.offer)}, true
	}
	u = ports.Update{
		Key:     updateKey(x.name, x.want),
		Subject: "extension " + x.name, From: x.version, To: x.want,
		Word:  fmt.Sprintf("extension %s %s, wanted %s", x.name, x.version, x.want),
		Step:  fmt.Sprintf("update %s %s -> %s", x.name, x.version, x.want),
		Done:  fmt.Sprintf("extension %s updated %s -> %s", x.name, x.version, x.want),
		Offer: x.offer,
	}
	switch {
	case !x.known:
		u.Refused = fmt.Sprintf("the server has no version %s of %s (it has %s)", x.want, x.name, x.offer)
	case x.unsafe != "":
		// The script runs as a superuser resolving names there: the consumer's planted
		// function or operator would run with the superuser's rights.
		u.Refused = fmt.Sprintf("its update script would run as a superuser searching schema %s, where others may create objects "+
			"(drop it to have it made again in %s)", x.unsafe, extensionSchema)
	case x.path:
	case x.back:
		u.Refused = fmt.Sprintf("%s is older than the installed %s: an extension is never downgraded", x.want, x.version)
	default:
		u.Refused = fmt.Sprintf("the server has no update path from %s to %s", x.version, x.want)
	}
	return u, true
}

// versionsHeld turns what a check observed into the Holding's parts: the extensions missing
// (drift), the updates due, and the keys of those held at the wanted version. A refusal the
// server gave when an update was tried (delegated) is the update's.
func (xp *extensionPath) versionsHeld(role string, seen []installed) (drift []change, updates []ports.Update, has []string) {
	for _, x := range seen {
		u, due := x.change()
		if x.version == "" && !due {
			drift = append(drift, change{kind: extensionMissing, subject: x.name})
			continue
		}
		if !due {
			has = append(has, updateKey(x.name, x.want))
			continue
		}
		if why, ok := xp.refusedUpdate.Load(role + "/" + u.Key); ok && u.Refused == "" {
			u.Refused = why.(string)
		}
		updates = append(updates, u)
	}
	return drift, updates, has
}

// updateExtensions brings each extension in seen that p lets Create update (its key among
// p.Updates) to the version wanted, one ALTER EXTENSION ... UPDATE TO each, as the provider,
// under its lock_timeout: a consumer's long query delays an update (a transient error, tried
// again), an update never stalls the consumer for long. Each update is one statement, so one
// transaction: a script that fails leaves the version that was. It answers whether it updated
// one, and where one failed, a *ports.UpdateFailed; the others go on. refusable is whether the
// server may refuse the provider an update (powers.refusable): added to told, to be said once,
// and not tried again.
func (xp *extensionPath) updateExtensions(ctx context.Context, db *pgx.Conn, role string, seen []installed, allowed []string, refusable bool, told *facts) (updated bool, err error) {
	var failed error
	for _, x := range seen {
		u, due := x.change()
		if !due || u.Refused != "" || !slices.Contains(allowed, u.Key) {
			continue
		}
		if _, e := db.Exec(ctx, "ALTER EXTENSION "+ident(x.name)+" UPDATE TO "+literal(x.want)); e != nil {
			switch code := pgCode(e); {
			case code == lockNotAvailable:
				return updated, transient(fmt.Errorf("%s: a session holds a lock it needs (%s)", u.Step, pgMessage(e)))
			case code == insufficientPrivilege && refusable:
				// The server does not let a provider that is not a superuser update it: a refusal
				// of this consumer's update, said once; a rollout is not halted for it.
				xp.refusedUpdate.Store(role+"/"+u.Key, "the server refuses it ("+pgMessage(e)+")")
				told.holds(sayKey{role, extensionUpdate, x.name}, pgMessage(e),
					"%s: %s is refused by the server (%s); skipped", role, u.Step, pgMessage(e))
				continue
			case code == "":
				return updated, fmt.Errorf("%s: %w", u.Step, e)
			}
			if failed == nil {
				failed = &ports.UpdateFailed{Update: u, Reason: pgMessage(e)}
			}
			continue
		}
		xp.refusedUpdate.Delete(role + "/" + u.Key)
		updated = true
	}
	return updated, failed
}

// offered is what the server offers of one extension, alike in every database (its control
// and script files): its default version, its versions in the server's order, the extensions
// each requires and the schema its control file fixes for it ("" where it fixes none), and the
// update paths it has, by their ends (read only where asked for: offerings.of).
type offered struct {
	def      string
	versions []string
	requires map[string][]string
	schemas  map[string]string
	paths    map[[2]string]bool
}

// offerings reads what the server offers at most once for all the checks of a batch (or for
// one Create): reading it lists every extension's control and script files, 20 ms of the
// server's CPU on a quiet 2-core machine, 0.15-0.5 s under load with 840 versions, whether one
// extension is asked for or all; a check of each of a rollout's consumers asked it, and a
// create asked it once and once more for each extension (issue 40). Each extension's update
// paths are read apart, on the first ask for them.
type offerings struct {
	q     querier
	mu    sync.Mutex // held while every extension's offer is read: one read
	all   map[string]offered
	read  bool
	paths map[string]*pathsOnce
	// kept, where set, is the Backend's read kept from one create to the next, for a create
	// of the extensions named; cached is whether all came from it unread.
	kept   *offeredCache
	named  []string
	cached bool
}

// pathsOnce is one extension's update paths, read by the first check that asks; one whose read
// failed (its own deadline passed) leaves them for the next to read.
type pathsOnce struct {
	mu    sync.Mutex
	done  bool
	paths map[[2]string]bool
}

func newOfferings(q querier) *offerings { return &offerings{q: q, paths: map[string]*pathsOnce{}} }

// offeredCache is what the server offers of every extension, kept by the Backend from one
// create's read to the next while what the server lists of them (each extension and its
// default version, stamped) has not changed: the stamp reads each control file once, 2 ms of
// a quiet server's CPU with 178 of them, where the whole read lists every script file once for
// each extension, 44 ms (issue 40). An extension package upgraded under the same stamp still
// creates only the version judged (createExtension names it), and a version pinned that the
// kept read does not list sends a create back to the server (offerings.fresh).
//
// A stamp read serves the creates that follow it for stampHolds without being read again,
// where the kept read lists every extension they name: reading it costs the server 7-8 ms of
// its CPU a create (every control file parsed), where a whole create of a consumer with one
// extension costs 55-65 ms (PostgreSQL 15, in memory). An extension a create names that the
// kept read does not list has the stamp read at once, so that one installed meanwhile is
// created, not lacked; a default version changed meanwhile is seen within stampHolds, and what
// was created at the one before is updated as any other.
type offeredCache struct {
	mu     sync.Mutex
	stamp  string
	at     time.Time // when the stamp was last read
	all    map[string]offered
	reads  int              // how many times the whole offer was read (the tests')
	stamps int              // how many times the stamp was read (the tests')
	now    func() time.Time // the clock; time.Now where nil (the tests')
}

// stampHolds is how long a stamp read serves the creates that follow it (offeredCache).
const stampHolds = time.Second

// sqlOfferStamp is a digest of the extensions the server has and their default versions.
const sqlOfferStamp = `SELECT coalesce(md5(string_agg(name || ' ' || coalesce(default_version, ''), ',' ORDER BY name)), '')
FROM pg_catalog.pg_available_extensions`

// catalog is what the server offers of every extension, for a create that names names: the
// kept read where a stamp read less than stampHolds ago serves and it lists them all, or
// where the server's stamp is the one it was read under; else read again on q and kept.
// cached says which.
func (c *offeredCache) catalog(ctx context.Context, q querier, names []string) (all map[string]offered, cached bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now
	if c.now != nil {
		now = c.now
	}
	at := now()
	if c.all != nil && at.Sub(c.at) < stampHolds && !slices.ContainsFunc(names, func(x string) bool { return !has(c.all, x) }) {
		return c.all, true, nil
	}
	var stamp string
	if err := q.QueryRow(ctx, sqlOfferStamp).Scan(&stamp); err != nil {
		return nil, false, fmt.Errorf("read the extensions the server offers: %w", err)
	}
	c.stamps++
	if c.all != nil && c.stamp == stamp {
		c.at = at
		return c.all, true, nil
	}
	all, err = readCatalog(ctx, q)
	if err != nil {
		return nil, false, err
	}
	c.stamp, c.all, c.at = stamp, all, at // read after the stamp: never older than it
	c.reads++
	return all, false, nil
}

// reread reads what the server offers again on q, and keeps it under the stamp it had.
func (c *offeredCache) reread(ctx context.Context, q querier) (map[string]offered, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	all, err := readCatalog(ctx, q)
	if err != nil {
		return nil, err
	}
	c.all = all
	c.reads++
	return all, nil
}

// catalog is what the server offers of every extension it has, by name, read on the first
// call; a read that failed is tried again by the next.
func (f *offerings) catalog(ctx context.Context) (map[string]offered, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.read {
		var all map[string]offered
		var err error
		if f.kept != nil {
			all, f.cached, err = f.kept.catalog(ctx, f.q, f.named)
		} else {
			all, err = readCatalog(ctx, f.q)
		}
		if err != nil {
			return nil, err
		}
		f.all, f.read = all, true
	}
	return f.all, nil
}

// fresh is whether what f answers was read for it, not kept from an earlier create; where it
// was kept, it is read again, so that what f answers next is the server's now.
func (f *offerings) fresh(ctx context.Context) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.cached {
		return true, nil
	}
	all, err := f.kept.reread(ctx, f.q)
	if err != nil {
		return false, err
	}
	f.all, f.cached = all, false
	return false, nil
}

// of is what the server offers of the extension name, its update paths included.
func (f *offerings) of(ctx context.Context, name string) (offered, error) {
	all, err := f.catalog(ctx)
	if err != nil {
		return offered{}, err
	}
	o := all[name]
	f.mu.Lock()
	p, ok := f.paths[name]
	if !ok {
		p = &pathsOnce{}
		f.paths[name] = p
	}
	f.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.done && len(o.versions) > 0 { // the server has none: no paths to ask of it
		paths, err := readPaths(ctx, f.q, name)
		if err != nil {
			return offered{}, err
		}
		p.paths, p.done = paths, true
	}
	o.paths = p.paths
	return o, nil
}

// readCatalog reads what the server offers of every extension, in one statement.
func readCatalog(ctx context.Context, q querier) (map[string]offered, error) {
	rows, err := q.Query(ctx, `SELECT e.name::text, coalesce(e.default_version::text, ''), v.version::text, coalesce(v.schema::text, ''),
  coalesce(v.requires::text[], '{}')
FROM pg_catalog.pg_available_extensions e LEFT JOIN pg_catalog.pg_available_extension_versions v ON v.name = e.name
ORDER BY e.name, v.version`)
	if err != nil {
		return nil, fmt.Errorf("read the extensions the server offers: %w", err)
	}
	all := map[string]offered{}
	var name, def, schema string
	var version *string
	var requires []string
	if _, err := pgx.ForEachRow(rows, []any{&name, &def, &version, &schema, &requires}, func() error {
		o, ok := all[name]
		if !ok {
			o = offered{def: def, requires: map[string][]string{}, schemas: map[string]string{}}
		}
		if version != nil {
			o.versions, o.requires[*version], o.schemas[*version] = append(o.versions, *version), requires, schema
		}
		all[name] = o
		requires = nil
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read the extensions the server offers: %w", err)
	}
	return all, nil
}

// readPaths reads the update paths the server has for the extension name, by their ends.
func readPaths(ctx context.Context, q querier, name string) (map[[2]string]bool, error) {
	paths := map[[2]string]bool{}
	rows, err := q.Query(ctx, `SELECT p.source::text, p.target::text FROM pg_catalog.pg_extension_update_paths($1) p WHERE p.path IS NOT NULL`, name)
	if err != nil {
		return nil, fmt.Errorf("read the update paths of extension %s: %w", name, err)
	}
	var from, to string
	if _, err := pgx.ForEachRow(rows, []any{&from, &to}, func() error { paths[[2]string{from, to}] = true; return nil }); err != nil {
		return nil, fmt.Errorf("read the update paths of extension %s: %w", name, err)
	}
	return paths, nil
}
