// The record of what the provider manages: a comment on each managed role; Managed reads it.

package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/novox/postgres-provider/ports"
)

// The record of what the provider manages is a comment on each role it manages, written in the
// transaction that creates or alters the role. A role's comment lives in the cluster-wide
// catalog (pg_shdescription), as roles do, whatever database the provider connects to; it goes
// with DROP ROLE, so a dropped role leaves no record behind; and only a superuser or a role
// with CREATEROLE may write it, which a consumer never is.

// recordPrefix starts every comment the provider writes on a role it manages, before the JSON.
const recordPrefix = "novox-provisioner "

// sqlRecords are the comments of roles that start as this provider's record (sd), with the
// roles (o) they are on, as Managed and the claim (observeSQL) read them: by LIKE, not
// starts_with, which looks up the collation at every row (the prefix holds neither % nor _,
// and were it to, Go reads only records: parseRecord).
var sqlRecords = `pg_catalog.pg_shdescription sd JOIN pg_catalog.pg_roles o ON o.oid = sd.objoid
      AND sd.classoid = 'pg_catalog.pg_authid'::pg_catalog.regclass AND sd.description LIKE ` + literal(recordPrefix+"%")

// recordVersion is the format of the records this provider writes. A record of a later format
// was written by a newer provider: it is left alone, and said once.
const recordVersion = 1

// States of a record.
const (
	active    = "active"
	withdrawn = "withdrawn"
)

// record is what the provider keeps on a role it manages. It holds no password, nor anything
// derived from one.
type record struct {
	// V is the record's format; 0 for the records written before it had one.
	V int `json:"v,omitempty"`
	// Login is the role the record was written on: a role renamed since (or one the record
	// was copied to) is not the provider's. Empty in the records written before it was kept.
	Login string `json:"login,omitempty"`
	// Resource is the requirement of the provider that manages the role.
	Resource string `json:"resource"`
	// Database is the database the consumer asked for when it was last created.
	Database string `json:"database"`
	// Databases are every database the provider made, or adopted, for the consumer: a drop
	// takes these and no other.
	Databases []string `json:"databases,omitempty"`
	// Derived is what the mesh derived for the consumer when it was last created.
	Derived map[string]any `json:"derived,omitempty"`
	// State is active or withdrawn; Since is when it was withdrawn.
	State string     `json:"state"`
	Since *time.Time `json:"since,omitempty"`
}

// databases are the databases the record says the provider made for the consumer: those it
// lists, or, in a record from before it listed them, the one it names, else the one Create
// names from what was derived.
func (r record) databases(as string) []string {
	switch {
	case len(r.Databases) > 0:
		return r.Databases
	case r.Database != "":
		return []string{r.Database}
	}
	if db, err := databaseOf(as, nil, r.Derived); err == nil {
		return []string{db}
	}
	return nil
}

// parseRecord reads a role's comment; ok is false where the comment is not a record.
func parseRecord(comment *string) (record, bool) {
	if comment == nil || !strings.HasPrefix(*comment, recordPrefix) {
		return record{}, false
	}
	var r record
	if err := json.Unmarshal([]byte(strings.TrimPrefix(*comment, recordPrefix)), &r); err != nil || r.Resource == "" {
		return record{}, false
	}
	return r, true
}

// text is the comment that holds r.
func (r record) text() string {
	raw, _ := json.Marshal(r)
	return recordPrefix + string(raw)
}

// managed is r as the domain sees it.
func (r record) managed(as string) ports.Managed {
	m := ports.Managed{As: as, Withdrawn: r.State == withdrawn}
	if m.Withdrawn && r.Since != nil {
		m.Since = *r.Since
	}
	return m
}

// Managed lists the consumers this provider's record names, active or withdrawn, after it checked
// the server as a whole (Standing). Its error says what is wrong with the server, and what to do.
func (b *Backend) Managed(ctx context.Context) ([]ports.Managed, error) {
	if err := b.Standing(ctx); err != nil {
		return nil, err
	}
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return nil, b.reach.serverError(err)
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, `SELECT o.rolname::text, sd.description FROM `+sqlRecords)
	if err != nil {
		return nil, b.reach.serverError(err)
	}
	var (
		out     []ports.Managed
		stale   []string // withdrawn, in a record of an older format
		as      string
		comment *string
	)
	_, err = pgx.ForEachRow(rows, []any{&as, &comment}, func() error {
		if r, ok := parseRecord(comment); ok && r.Resource == b.resource {
			if why := foreign(as, r); why != "" {
				b.voice.once(sayKey{as, recordForeign, ""}, why, slog.LevelWarn, "%s", why)
				return nil
			}
			out = append(out, r.managed(as))
			if r.State == withdrawn && r.V < recordVersion {
				stale = append(stale, as)
			}
		}
		return nil
	})
	if err != nil {
		return nil, b.reach.serverError(err)
	}
	conn.Release() // back to the pool before the rewrites take one (a pool may hold only one)
	b.upgradeWithdrawn(ctx, stale)
	return out, nil
}

// upgradeWithdrawn rewrites the records of withdrawn consumers that are of an older format in
// the current one, each under its consumer's lock and in a transaction that reads it again:
// Create rewrites an active consumer's, and nothing else would ever write a withdrawn one's.
// Only the format changes (its login and the databases it gives are written out); the consumer
// stays withdrawn, since the same. A record that changed meanwhile is left as it is; one that
// cannot be rewritten is said once and read as it is. A Backend that only looks rewrites
// nothing.
func (b *Backend) upgradeWithdrawn(ctx context.Context, logins []string) {
	if b.readOnly {
		return
	}
	p := b.stance().powers // one reading of the mode for all of them
	for _, as := range logins {
		if b.rules.checkName("login", as) != nil {
			continue // not a login the provider could have made: left as it is
		}
		err := b.locks.locked(ctx, as, p, func(ctx context.Context, conn *pgxpool.Conn) error {
			return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				f, err := observe(ctx, tx, p, as, "", forWithdrawal)
				if err != nil || !f.role {
					return err
				}
				r, err := recordOf(as, b.resource, f.comment)
				if err != nil || r.State != withdrawn || r.V >= recordVersion {
					return nil // changed meanwhile
				}
				r.V, r.Login, r.Databases = recordVersion, as, r.databases(as)
				return setRecord(ctx, tx, as, r)
			})
		})
		if err != nil {
			b.voice.once(sayKey{as, recordUpgrade, ""}, err.Error(), slog.LevelWarn,
				"%s: its record (withdrawn) could not be rewritten in the current format: %v", as, err)
		}
	}
}

// recordOf answers the record comment holds on role where it is the record of the provider
// of resource, and an error that says whose the role is otherwise (errNotRecorded: nobody's).
func recordOf(role, resource string, comment *string) (record, error) {
	r, ok := parseRecord(comment)
	switch {
	case !ok:
		return record{}, errNotRecorded
	case r.Resource != resource:
		return record{}, refused(fmt.Errorf("role %s is managed by the provider of %q, not %q; it is not taken over", role, r.Resource, resource))
	}
	if why := foreign(role, r); why != "" {
		return record{}, errors.New(why)
	}
	return r, nil
}

// foreign is why a record of this provider's on role does not make role the provider's: a
// record of a format this provider does not know, or one written on another role (the role
// was renamed, or the record copied); "" where it does.
func foreign(role string, r record) string {
	switch {
	case r.V > recordVersion:
		return fmt.Sprintf("role %s carries a record of format %d, newer than this provider's (%d); it is left alone "+
			"(a newer provider wrote it)", role, r.V, recordVersion)
	case r.Login != "" && r.Login != role:
		return fmt.Sprintf("role %s carries the provider's record of %s: it was renamed, or the record copied; "+
			"it is not the provider's and is never repaired, withdrawn or dropped", role, r.Login)
	}
	return ""
}

// sameRecord is whether two records say the same.
func sameRecord(a, b record) bool {
	return a.V == b.V && a.Login == b.Login && a.Resource == b.Resource && a.Database == b.Database &&
		slices.Equal(a.Databases, b.Databases) && a.State == b.State && a.Since == nil && b.Since == nil &&
		(len(a.Derived) == 0 && len(b.Derived) == 0 || reflect.DeepEqual(a.Derived, b.Derived))
}

// record is the record the role carries once Create has run, where had is the record it
// carried and owns the databases the role owns: the databases the provider made for the consumer before
// (and that the role still owns) stay in it beside the one asked for now, so that a drop
// takes them all.
func (d definition) record(had record, owns []string) record {
	databases := []string{d.database}
	for _, db := range had.databases(d.role) {
		if slices.Contains(owns, db) && !slices.Contains(databases, db) {
			databases = append(databases, db)
		}
	}
	slices.Sort(databases)
	return record{V: recordVersion, Login: d.role, Resource: d.resource, Database: d.database, Databases: databases,
		Derived: d.derived, State: active}
}
