// HoldsAll: every consumer checked against what Create makes, in one catalog round trip, then
// the databases with extensions, bounded by the slots.

package postgres

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/novox/postgres-provider/ports"
)

// HoldsAll checks every consumer of ps and changes nothing: one round trip asks the catalog
// about all their roles and databases (and which of the extensions they name the server has),
// the stored passwords are verified here (answers remembered per role), and only consumers
// that name extensions cost more: one short-lived, read-only connection per database, as many at
// once as the Backend has slots for them, in the order of ps. each bounds the catalog's round
// trip and each database's check from when it starts, not while it waits for a connection or
// a slot; once one timed out, the database checks not yet started are not made (ErrNotAsked).
func (b *Backend) HoldsAll(ctx context.Context, ps []ports.Provision, each time.Duration) []ports.Checked {
	out := make([]ports.Checked, len(ps))
	if len(ps) == 0 {
		return out
	}
	wants := make([]wanted, len(ps))
	var roles, databases, named []string
	index := make([]int, 0, len(ps)) // which of ps are asked about
	for i, p := range ps {
		w, err := b.wantedOf(p)
		if err != nil {
			out[i].Err = err
			continue
		}
		wants[i] = w
		index = append(index, i)
		roles = append(roles, w.role)
		databases = append(databases, w.database)
		for _, x := range w.extensions {
			if !slices.Contains(named, x) {
				named = append(named, x)
			}
		}
	}
	if len(index) == 0 {
		return out
	}
	facts, available, err := b.catalogWithin(ctx, each, roles, databases, named)
	if err != nil {
		for _, i := range index { // one cause for all
			out[i].Err = &ports.SharedError{Err: fmt.Errorf("check %s: %w", wants[i].role, err), Cause: err.Error()}
		}
		return out
	}
	// The stored verifiers, checked on every core: a process that has not checked them before
	// (a start, a take-over) runs PBKDF2 once for each.
	// A provider that is not a superuser cannot read them: it logs in with the password below,
	// as the consumers the loop granted a login this pass (Provision.Login); the others'
	// passwords are taken as held until their turn.
	delegated := b.delegated()
	boundedEach(len(index), runtime.GOMAXPROCS(0), func(k int) {
		i := index[k]
		facts[k].verifies = delegated || facts[k].stored != nil && b.verified.verifies(*facts[k].stored, ps[i].Password, wants[i].role)
	})
	var deep []int // the consumers whose databases must be looked into
	for k, i := range index {
		f := facts[k]
		f.available = make([]string, 0, len(wants[i].extensions))
		for _, x := range wants[i].extensions {
			if _, refused := b.refusedExt.Load(wants[i].role + "/" + x); has(available, x) && b.allows(x) && !refused {
				f.available = append(f.available, x)
			}
		}
		f.wantLimit = wants[i].limit
		f.wantSettings = wants[i].settings
		facts[k] = f
		if drift := b.drift(wants[i].role, f); len(drift) > 0 || len(f.available) == 0 && !(delegated && ps[i].Login) {
			out[i].Holding = ports.Holding{Held: len(drift) == 0, Drift: drift}
			continue
		}
		deep = append(deep, k)
	}
	var timedOut atomic.Bool
	boundedEach(len(deep), cap(b.databases), func(j int) {
		k := deep[j]
		i := index[k]
		var release func()
		var err error
		if !timedOut.Load() {
			release, err = b.slot(ctx) // its turn; its deadline starts once it has it
		}
		switch {
		case err != nil:
			out[i].Err = checkErr(err, "check extensions in %s", wants[i].database)
			return
		case release == nil || timedOut.Load():
			if release != nil {
				release()
			}
			out[i].Err = fmt.Errorf("check extensions in %s: %w", wants[i].database, ports.ErrNotAsked)
			return
		}
		dctx, cancel := context.WithTimeout(ctx, each)
		defer cancel()
		if delegated && ps[i].Login {
			ok, err := b.logsIn(dctx, wants[i], ps[i].Password)
			if err != nil || !ok || len(facts[k].available) == 0 {
				release()
			}
			switch {
			case err != nil:
				if errors.Is(dctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
					timedOut.Store(true)
				}
				out[i].Err = checkErr(err, "check the password of %s by logging in", wants[i].role)
				return
			case !ok:
				out[i].Holding = ports.Holding{Drift: []string{"password"}}
				return
			case len(facts[k].available) == 0:
				out[i].Holding = ports.Holding{Held: true}
				return
			}
		}
		held, err := b.inDatabase(dctx, wants[i], facts[k].available, available, release)
		if err != nil {
			if errors.Is(dctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
				timedOut.Store(true)
			}
			out[i].Err = checkErr(err, "check extensions in %s", wants[i].database)
			return
		}
		if !facts[k].searchPath {
			held.Drift = append(held.Drift, "search_path setting")
		}
		held.Held = len(held.Drift) == 0
		out[i].Holding = held
	})
	return out
}

// boundedEach calls fn(0) ... fn(n-1), at most limit at once, starting them in that order, and
// returns when all have returned.
func boundedEach(n, limit int, fn func(int)) {
	var g errgroup.Group
	g.SetLimit(max(1, limit))
	for k := range n {
		g.Go(func() error { fn(k); return nil })
	}
	_ = g.Wait() // fn returns nothing to wait for but its end
}

// drift is what differs between what the catalog says of a consumer and what Create makes, in
// words an operator reads; empty where nothing does. The extensions are looked into apart.
func (b *Backend) drift(role string, f facts) []string {
	var d []string
	if !f.role {
		return append(d, "role missing")
	}
	switch r, ok := parseRecord(f.comment); {
	case !ok || r.Resource != b.resource || b.foreign(role, r) != "":
		d = append(d, "not recorded as the provider's")
	case r.State != active:
		d = append(d, "recorded withdrawn")
	case r.V < recordVersion:
		d = append(d, "record format") // written before the record named its login
	}
	d = append(d, f.standing.drift()...)
	if !f.verifies {
		d = append(d, "password")
	}
	if f.limit != f.wantLimit {
		d = append(d, "connection limit")
	}
	if !f.database {
		return append(d, "database missing")
	}
	if !f.owner {
		d = append(d, "owner")
	}
	if f.open {
		d = append(d, "open to others")
	}
	if !f.provides {
		d = append(d, "closed to the provider")
	}
	if !f.allowed {
		d = append(d, "connections not allowed")
	}
	if f.template {
		d = append(d, "a template")
	}
	return append(d, settingsDrift(f.wantSettings, f.setconfig)...)
}

// inDatabase is what the check finds inside the consumer's database: the provider's schema
// (owned by a superuser, the consumer's role may use it and nobody else create in it), each of
// names installed and at which version against the one wanted (the pin, else the server's
// default in defaults), and the extensions kept that it no longer names; asked in one round
// trip on a read-only connection of its own in the slot release gives back. Held is left to
// the caller.
func (b *Backend) inDatabase(ctx context.Context, w wanted, names []string, defaults map[string]string, release func()) (ports.Holding, error) {
	var h ports.Holding
	conn, err := b.connectIn(ctx, w.database, true, release)
	if err != nil {
		return h, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	wants := make([]string, len(names))
	for i, x := range names {
		wants[i] = w.want(x, defaults[x])
	}
	batch := &pgx.Batch{}
	batch.Queue(`
SELECT coalesce((SELECT (r.rolsuper OR r.rolname = current_user)
                        AND pg_catalog.has_schema_privilege($2, n.oid, 'USAGE')
                        AND NOT pg_catalog.has_schema_privilege($2, n.oid, 'CREATE')
                        AND NOT pg_catalog.has_schema_privilege('public', n.oid, 'CREATE')
                 FROM pg_catalog.pg_namespace n JOIN pg_catalog.pg_roles r ON r.oid = n.nspowner
                 WHERE n.nspname = $1), false)`, extensionSchema, w.role)
	batch.Queue(sqlInstalled, names, wants)
	batch.Queue(sqlKept, w.extensions)
	results := conn.SendBatch(ctx, batch)
	defer results.Close()
	var schemaOK bool
	var kept []string
	if err := results.QueryRow().Scan(&schemaOK); err != nil {
		return h, err
	}
	rows, err := results.Query()
	if err != nil {
		return h, err
	}
	seen, err := scanInstalled(rows)
	if err != nil {
		return h, err
	}
	if err := results.QueryRow().Scan(&kept); err != nil {
		return h, err
	}
	if !schemaOK {
		h.Drift = append(h.Drift, "extensions schema")
	}
	var missing []string
	missing, h.Updates, h.Has = b.versionsHeld(w.role, seen)
	h.Drift = append(h.Drift, missing...)
	for _, x := range kept {
		h.Kept = append(h.Kept, "extension "+x+" kept: no longer named, never dropped")
	}
	return h, nil
}

// has is whether m has the key k.
func has[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}

// logsIn is whether the consumer's role logs in to its database with password, asked by
// logging in as it (a SCRAM exchange on a short-lived connection, in a slot of the Backend's
// budget for connections to consumers' databases that the caller holds): how a provider that
// cannot read stored verifiers checks the password. ok is false only where the server refused the password; any other
// refusal (the role's connection limit reached, no pg_hba.conf entry for the provider's host,
// the database not accepting connections) is an error: the password could not be checked.
func (b *Backend) logsIn(ctx context.Context, w wanted, password string) (ok bool, err error) {
	cfg := b.configIn(w.database)
	cfg.User, cfg.Password = w.role, password
	cfg.RuntimeParams = map[string]string{"application_name": b.application}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if pgCode(err) == invalidPassword {
		return false, nil
	}
	if code := pgCode(err); code != "" {
		return false, fmt.Errorf("%s (%s)", pgMessage(err), code)
	}
	if err != nil {
		return false, err
	}
	return true, conn.Close(context.WithoutCancel(ctx))
}
