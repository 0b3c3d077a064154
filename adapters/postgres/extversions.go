// Extensions' versions: the pins an entry names, what a check observed of each installed
// extension against the version wanted, and the update that brings it there.

package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

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

// sqlInstalled asks, in a consumer's database, the installed version of each extension of $1
// against the version of $2 wanted, and only where they differ, what the server offers for it
// (reading its scripts costs; a check where nothing differs reads none).
const sqlInstalled = `SELECT w.name, w.want, coalesce(e.extversion::text, ''),
  CASE WHEN e.extversion IS DISTINCT FROM w.want THEN EXISTS (SELECT 1 FROM pg_catalog.pg_available_extension_versions v
       WHERE v.name = w.name AND v.version = w.want) END,
  CASE WHEN e.extversion <> w.want THEN EXISTS (SELECT 1 FROM pg_catalog.pg_extension_update_paths(w.name) p
       WHERE p.source = e.extversion AND p.target = w.want AND p.path IS NOT NULL) END,
  CASE WHEN e.extversion <> w.want THEN EXISTS (SELECT 1 FROM pg_catalog.pg_extension_update_paths(w.name) p
       WHERE p.source = w.want AND p.target = e.extversion AND p.path IS NOT NULL) END,
  CASE WHEN e.extversion IS DISTINCT FROM w.want THEN (SELECT string_agg(v.version::text, ', ' ORDER BY v.version) FROM
       pg_catalog.pg_available_extension_versions v WHERE v.name = w.name) END,
  CASE WHEN e.extversion <> w.want THEN (SELECT string_agg(DISTINCT n.nspname::text, ', ') FROM pg_catalog.pg_extension r
       JOIN pg_catalog.pg_namespace n ON n.oid = r.extnamespace
       WHERE n.nspname NOT IN ('pg_catalog', '` + extensionSchema + `')
         AND (r.oid = e.oid
              OR r.oid IN (SELECT d.refobjid FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_extension'::regclass
                           AND d.objid = e.oid AND d.refclassid = 'pg_catalog.pg_extension'::regclass)
              OR r.extname = ANY (SELECT unnest(v.requires)::text FROM pg_catalog.pg_available_extension_versions v
                                  WHERE v.name = w.name AND v.version = w.want))) END
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS w (name, want, i)
LEFT JOIN pg_catalog.pg_extension e ON e.extname = w.name
ORDER BY w.i`

// sqlKept lists the extensions of a consumer's database that it does not name ($1), that no
// other extension depends on, and that are not PostgreSQL's own (plpgsql).
const sqlKept = `SELECT coalesce(array_agg(x.extname::text ORDER BY x.extname), '{}') FROM pg_catalog.pg_extension x
WHERE x.extname <> 'plpgsql' AND NOT x.extname = ANY(coalesce($1::text[], '{}'))
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.refclassid = 'pg_catalog.pg_extension'::regclass
                  AND d.refobjid = x.oid AND d.classid = 'pg_catalog.pg_extension'::regclass)`

// scanInstalled reads sqlInstalled's rows.
func scanInstalled(rows pgx.Rows) ([]installed, error) {
	var out []installed
	var x installed
	var known, path, back *bool
	var offer, unsafe *string
	_, err := pgx.ForEachRow(rows, []any{&x.name, &x.want, &x.version, &known, &path, &back, &offer, &unsafe}, func() error {
		x.known, x.path, x.back, x.offer, x.unsafe = known != nil && *known, path != nil && *path, back != nil && *back, "", ""
		if offer != nil {
			x.offer = *offer
		}
		if unsafe != nil {
			x.unsafe = *unsafe
		}
		out = append(out, x)
		return nil
	})
	return out, err
}

// versionsHeld turns what a check observed into the Holding's parts: the extensions missing
// (drift), the updates due, and the keys of those held at the wanted version. A refusal the
// server gave when an update was tried (delegated) is the update's.
func (b *Backend) versionsHeld(role string, seen []installed) (drift []change, updates []ports.Update, has []string) {
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
		if why, ok := b.refusedUpdate.Load(role + "/" + u.Key); ok && u.Refused == "" {
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
// one, and where one failed, a *ports.UpdateFailed; the others go on.
func (b *Backend) updateExtensions(ctx context.Context, db *pgx.Conn, role string, seen []installed, allowed []string) (updated bool, err error) {
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
			case code == insufficientPrivilege && b.powers().refusable:
				// The server does not let a provider that is not a superuser update it: a refusal
				// of this consumer's update, said once; a rollout is not halted for it.
				b.refusedUpdate.Store(role+"/"+u.Key, "the server refuses it ("+pgMessage(e)+")")
				if b.said.first(role+"/"+x.name+"/update", pgMessage(e)) {
					b.say(slog.LevelWarn, role, "%s: %s is refused by the server (%s); skipped", role, u.Step, pgMessage(e))
				}
				continue
			case code == "":
				return updated, fmt.Errorf("%s: %w", u.Step, e)
			}
			if failed == nil {
				failed = &ports.UpdateFailed{Update: u, Reason: pgMessage(e)}
			}
			continue
		}
		b.refusedUpdate.Delete(role + "/" + u.Key)
		updated = true
	}
	return updated, failed
}

// observeExtensions reads sqlInstalled for w's extensions in the connected database, wanted at
// the pinned or the server's default version (defaults).
func observeExtensions(ctx context.Context, db *pgx.Conn, w wanted, names []string, defaults map[string]string) ([]installed, error) {
	wants := make([]string, len(names))
	for i, x := range names {
		wants[i] = w.want(x, defaults[x])
	}
	rows, err := db.Query(ctx, sqlInstalled, names, wants)
	if err != nil {
		return nil, err
	}
	return scanInstalled(rows)
}
