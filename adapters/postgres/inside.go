// Inside a consumer's database: what a create and a check read there, alike and in one round
// trip (readInside): the provider's schema, the extensions installed, each one the consumer
// names against the version wanted, and those kept that it no longer names.

package postgres

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// inside is one read of what is inside a consumer's database (readInside): the provider's
// schema there, every extension installed with its schema, and where they were asked for, each
// extension the consumer names against the version it wants, and the extensions it no longer
// names that are kept.
type inside struct {
	schema  schemaSeen
	present map[string]string // every extension installed, by name: its schema
	named   []installed       // each of the names asked about, in their order
	kept    []string          // installed, no longer named, no other's dependency, not plpgsql
}

// insideAsks is what readInside asks beyond the schema and what is installed: names, at the
// versions wants (one each), compared as installed (nil: none), and whether the extensions
// kept are listed (a check's), against those the consumer's entry names (entry).
type insideAsks struct {
	names, wants []string
	kept         bool
	entry        []string
}

// readInside reads inside the database db is connected to, for the consumer's role, what a
// asks, in one round trip; a version of a named extension that is not the one wanted is
// completed with what the server offers of it (offer). A create and a check read alike.
func readInside(ctx context.Context, db *pgx.Conn, role string, a insideAsks, offer *offerings) (in inside, err error) {
	queued := &pgx.Batch{}
	queued.Queue(sqlSchemaAndInstalled, extensionSchema, role)
	if a.names != nil {
		queued.Queue(sqlInstalled, a.names, a.wants)
	}
	if a.kept {
		queued.Queue(sqlKept, a.entry)
	}
	results := db.SendBatch(ctx, queued)
	defer results.Close()
	var names, schemas []string
	s := &in.schema
	if err := results.QueryRow().Scan(&s.owner, &s.ownerFit, &s.closed, &s.asWritten, &names, &schemas); err != nil {
		return in, err
	}
	in.present = byName(names, schemas)
	if a.names != nil {
		rows, err := results.Query()
		if err != nil {
			return in, err
		}
		if in.named, err = scanInstalled(ctx, rows, offer); err != nil {
			return in, err
		}
	}
	if a.kept {
		if err := results.QueryRow().Scan(&in.kept); err != nil {
			return in, err
		}
	}
	return in, nil
}

// schemaSeen is the provider's schema in a consumer's database as one read of it finds it
// (sqlSchema): the one definition of whether it is fit to hold extensions, which the check
// (safe) and the create (ownedByAnother, toWrite) both judge by.
type schemaSeen struct {
	owner *string // its owner; nil where there is no such schema
	// ownerFit: its owner is a superuser or the provider's role; closed: the consumer's role
	// may use it, and neither that role nor PUBLIC may create in it, by any grant, memberships
	// included; asWritten: its privileges are exactly what the create writes (nothing to
	// PUBLIC, CREATE to no grant of the role's, USAGE granted the role by the owner), so that
	// writing them again would change nothing.
	ownerFit, closed, asWritten bool
}

// safe is whether extensions may stand in the schema: it is there, its owner fits, and the
// consumer cannot create in it. A check finds it drifted (schemaUnsafe) otherwise.
func (s schemaSeen) safe() bool { return s.owner != nil && s.ownerFit && s.closed }

// ownedByAnother is whether the schema is there and owned by a role that does not fit (one the
// consumer may have made it as, to plant objects in it): a create refuses it.
func (s schemaSeen) ownedByAnother() bool { return s.owner != nil && !s.ownerFit }

// toWrite is whether a create makes the schema, or writes its privileges again.
func (s schemaSeen) toWrite() bool { return s.owner == nil || !s.asWritten }

// sqlSchema is what schemaSeen holds, in its order, of the schema $1 in the connected database
// and the consumer's role $2, from sqlSchemaFrom.
const sqlSchema = `pg_catalog.pg_get_userbyid(n.nspowner), coalesce(r.rolsuper OR r.rolname = current_user, false),
  coalesce(pg_catalog.has_schema_privilege($2, n.oid, 'USAGE')
    AND NOT pg_catalog.has_schema_privilege($2, n.oid, 'CREATE')
    AND NOT pg_catalog.has_schema_privilege('public', n.oid, 'CREATE'), false),
  coalesce(NOT EXISTS (SELECT 1 FROM pg_catalog.aclexplode(n.nspacl) a
      WHERE a.grantee = 0 OR a.grantee = c.oid AND a.privilege_type = 'CREATE')
    AND EXISTS (SELECT 1 FROM pg_catalog.aclexplode(n.nspacl) a
      WHERE a.grantee = c.oid AND a.grantor = n.nspowner AND a.privilege_type = 'USAGE'), false)`

// sqlSchemaFrom is the row sqlSchema is read from: one, whether or not the schema exists.
const sqlSchemaFrom = `
FROM (SELECT 1) one
LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = $1
LEFT JOIN pg_catalog.pg_roles r ON r.oid = n.nspowner
LEFT JOIN pg_catalog.pg_roles c ON c.rolname = $2`

// sqlSchemaAndInstalled is the schema as sqlSchema reads it and the extensions installed, with
// their schemas, in one order: what a create reads before it makes any.
const sqlSchemaAndInstalled = `SELECT ` + sqlSchema + `,
  ` + sqlInstalledNames + `, ` + sqlInstalledSchemas + sqlSchemaFrom

// readInstalled reads the extensions installed in the connected database into present, by
// name, with their schemas.
func readInstalled(ctx context.Context, db *pgx.Conn, present map[string]string) error {
	var names, schemas []string
	if err := db.QueryRow(ctx, "SELECT "+sqlInstalledNames+", "+sqlInstalledSchemas).Scan(&names, &schemas); err != nil {
		return err
	}
	maps.Copy(present, byName(names, schemas))
	return nil
}

// sqlInstalledNames and sqlInstalledSchemas list the extensions installed in the connected
// database and their schemas, in one order: the one shape every read of them takes (byName).
const (
	sqlInstalledNames   = `ARRAY(SELECT ie.extname::text FROM pg_catalog.pg_extension ie ORDER BY ie.oid)`
	sqlInstalledSchemas = `ARRAY(SELECT isn.nspname::text FROM pg_catalog.pg_extension ie JOIN pg_catalog.pg_namespace isn ON isn.oid = ie.extnamespace ORDER BY ie.oid)`
)

// byName is the installed extensions' schemas by their names, as sqlInstalledNames and
// sqlInstalledSchemas list them; nil where they list none, or not alike.
func byName(names, schemas []string) map[string]string {
	if len(names) != len(schemas) || len(names) == 0 {
		return nil
	}
	m := make(map[string]string, len(names))
	for i, name := range names {
		m[name] = schemas[i]
	}
	return m
}

// sqlInstalled asks, in a consumer's database, the installed version of each extension of $1
// against the version of $2 wanted, and only where they differ, the schemas an update's script
// would search there: the extension's own and those of the extensions it requires, of which
// this database has each installed extension and its schema. What the server offers of it
// (its versions, update paths, what each version requires) is the same in every database and
// read once a batch (offerings).
const sqlInstalled = `SELECT w.name, w.want, coalesce(e.extversion::text, ''),
  CASE WHEN e.extversion <> w.want THEN ARRAY(SELECT n.nspname::text FROM pg_catalog.pg_extension r
       JOIN pg_catalog.pg_namespace n ON n.oid = r.extnamespace
       WHERE r.oid = e.oid
          OR r.oid IN (SELECT d.refobjid FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_extension'::regclass
                       AND d.objid = e.oid AND d.refclassid = 'pg_catalog.pg_extension'::regclass)) END,
  CASE WHEN e.extversion <> w.want THEN ` + sqlInstalledNames + ` END,
  CASE WHEN e.extversion <> w.want THEN ` + sqlInstalledSchemas + ` END
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS w (name, want, i)
LEFT JOIN pg_catalog.pg_extension e ON e.extname = w.name
ORDER BY w.i`

// seenInstalled is one row of sqlInstalled: the extension as installed, and where its version
// is not the one wanted, the schemas its update's script would search: its own and its
// dependencies' (own), and each installed extension's (schemas, by name).
type seenInstalled struct {
	installed
	own     []string
	schemas map[string]string
}

// against completes what was observed of x with what the server offers of it (o): whether it
// has the version wanted and the versions it has, the update paths either way, and the
// schemas, other than the catalog and the provider's, that an update's script would search.
// It is pure: table tests.
func (s seenInstalled) against(o offered) installed {
	x := s.installed
	if x.version == x.want {
		return x
	}
	x.known, x.offer = slices.Contains(o.versions, x.want), strings.Join(o.versions, ", ")
	if x.version == "" {
		return x
	}
	x.path, x.back = o.paths[[2]string{x.version, x.want}], o.paths[[2]string{x.want, x.version}]
	searched := slices.Clone(s.own)
	for _, r := range o.requires[x.want] {
		if schema, ok := s.schemas[r]; ok {
			searched = append(searched, schema)
		}
	}
	slices.Sort(searched)
	searched = slices.DeleteFunc(slices.Compact(searched), func(n string) bool { return n == "pg_catalog" || n == extensionSchema })
	x.unsafe = strings.Join(searched, ", ")
	return x
}

// sqlKept lists the extensions of a consumer's database that it does not name ($1), that no
// other extension depends on, and that are not PostgreSQL's own (plpgsql).
const sqlKept = `SELECT coalesce(array_agg(x.extname::text ORDER BY x.extname), '{}') FROM pg_catalog.pg_extension x
WHERE x.extname <> 'plpgsql' AND NOT x.extname = ANY(coalesce($1::text[], '{}'))
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.refclassid = 'pg_catalog.pg_extension'::regclass
                  AND d.refobjid = x.oid AND d.classid = 'pg_catalog.pg_extension'::regclass)`

// scanInstalled reads sqlInstalled's rows, and completes each whose version is not the one
// wanted with what the server offers of it (offer): its update paths only where it is
// installed at another version.
func scanInstalled(ctx context.Context, rows pgx.Rows, offer *offerings) ([]installed, error) {
	var seen []seenInstalled
	var x installed
	var own, names, schemas []string
	_, err := pgx.ForEachRow(rows, []any{&x.name, &x.want, &x.version, &own, &names, &schemas}, func() error {
		seen = append(seen, seenInstalled{installed: x, own: own, schemas: byName(names, schemas)})
		own, names, schemas = nil, nil, nil
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]installed, len(seen))
	for i, s := range seen {
		var o offered
		switch {
		case s.version == s.want:
			out[i] = s.installed
			continue
		case s.version == "": // not installed: whether the server has the version wanted, no update path
			all, err := offer.catalog(ctx)
			if err != nil {
				return nil, err
			}
			o = all[s.name]
		default:
			if o, err = offer.of(ctx, s.name); err != nil {
				return nil, err
			}
		}
		out[i] = s.against(o)
	}
	return out, nil
}
