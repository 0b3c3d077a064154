// HoldsAll: every consumer checked against what Create makes, in one catalog round trip, then
// the databases with extensions, bounded by the slots.

package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/novox/postgres-provider/ports"
)

// HoldsAll checks every consumer of ps and changes nothing: one round trip asks the catalog
// about all their roles and databases (and which of the extensions they name the server has),
// the stored passwords are verified here (answers remembered per role), and only consumers
// that name extensions cost more, where the loop did not skip their inside
// (Provision.SkipInside): one short-lived, read-only connection per database, as many at
// once as the Backend has slots for them, in the order of ps (weigh). each bounds the
// catalog's round trip and each database's check from when it starts, not while it waits for
// a connection or a slot; once one timed out, the database checks not yet started are not
// made (ErrNotAsked). Each check is told (ports.Answered) as it is answered: those the catalog
// decides at once, then each check inside a database as it returns.
func (b *Backend) HoldsAll(ctx context.Context, ps []ports.Provision, each time.Duration) []ports.Checked {
	var told atomic.Int64
	answered := func(n int) { told.Add(int64(n)); ports.Answered(ctx, n) }
	found := make([]checked, len(ps))
	wants := make([]wanted, len(ps))
	index := make([]int, 0, len(ps)) // which of ps are asked about
	for i, p := range ps {
		w, err := b.rules.wantedOf(p)
		if err != nil {
			found[i].Err = err
			continue
		}
		wants[i] = w
		index = append(index, i)
	}
	if len(index) > 0 {
		s := b.stance() // one reading of the mode for the whole batch
		roles, databases, named := asking(wants, index)
		seen, available, err := b.catalogWithin(ctx, each, s.readsVerifiers, roles, databases, named)
		if err != nil { // one cause for all
			for _, i := range index {
				found[i].Err = askedErr(wants[i].role, err)
			}
		} else {
			b.weigh(ctx, s, ps, wants, index, seen, available, each, answered, false, found)
		}
	}
	ports.Answered(ctx, len(ps)-int(told.Load())) // those answered without a call: refused, or not asked
	out := make([]ports.Checked, len(ps))
	for i, c := range found {
		out[i] = c.Checked
		if c.Err == nil {
			out[i].Drift = words(c.changes)
			out[i].Held = len(c.changes) == 0
		}
	}
	return out
}

// checked is what a check found of one consumer: its changes (the drift, typed), and the
// Holding's other parts or the error that kept it from being asked.
type checked struct {
	ports.Checked
	changes []change
	// refusal is why a create would make nothing inside the consumer's database (inside.refusal),
	// in Create's words, nil where it would: a plan says it (Foresee), a check finds drift.
	refusal error
}

// weigh is a check past the catalog's round trip, on what it read: seen, each of ps that index
// names observed, in the order of index, and which of the extensions they name the server has
// (available). It answers into out, in the order of ps, as a provider standing as s, and tells
// answered as checks are answered. A check stops at the first drift, the catalog's or a
// login's: a create is due either way. A plan's (pastDrift: Foresee, which weighs what it
// observed itself, so that it reads each consumer once) goes on into the database where the
// consumer names extensions there and the provider may enter it, to find what Create, having
// repaired the rest, would refuse to make there, and what else it would make; where the
// database is yet to be made, what Create would refuse to make in it (refusedInNew).
func (b *Backend) weigh(ctx context.Context, s stance, ps []ports.Provision, wants []wanted, index []int, seen []observed, available map[string]string,
	each time.Duration, answered func(int), pastDrift bool, out []checked) {
	byLogin := !s.readsVerifiers
	b.verified.verifyAll(ps, wants, index, seen, byLogin)
	offer := newOfferings(b.pool)          // what the server offers, read once for the batch where asked
	var deep []int                         // the consumers whose databases must be looked into
	inside := make([][]string, len(index)) // the extensions each names that are looked into
	lacks := make([][]string, len(index))  // and those the provider does not make for it
	drift := make([][]change, len(index))  // and what the catalog found, where a plan goes on past it
	var toMake []int                       // and, in a plan, those whose database Create is to make
	for k, i := range index {
		inside[k] = make([]string, 0, len(wants[i].extensions))
		for _, x := range wants[i].extensions {
			if why := b.ext.lacking(wants[i].role, x, has(available, x)); why != "" {
				lacks[k] = append(lacks[k], lack(x, why))
				continue
			}
			inside[k] = append(inside[k], x)
		}
		cs := define(wants[i], b.resource).changes(seen[k], s.powers)
		if ps[i].SkipInside && len(inside[k]) > 0 { // what is inside taken as last found; the catalog's part still checked
			if !seen[k].searchPath {
				cs = append(cs, change{kind: searchPathUnset})
			}
			inside[k] = inside[k][:0]
		}
		asks := len(inside[k]) > 0 || byLogin && ps[i].Login // of the server, beyond the catalog
		made := seen[k].role && seen[k].database
		past := pastDrift && len(inside[k]) > 0 && made && !hasKind(cs, closedToProvider, connectionsOff)
		if len(cs) > 0 && !past || !asks {
			out[i].changes = cs
			if pastDrift && len(inside[k]) > 0 && !seen[k].database {
				toMake = append(toMake, k)
			}
			continue
		}
		drift[k] = cs
		deep = append(deep, k)
	}
	answered(len(index) - len(deep)) // decided by the catalog alone
	if len(toMake) > 0 {
		mctx, cancel := context.WithTimeout(ctx, each) // what the server offers, read once
		for _, k := range toMake {
			i := index[k]
			err := refusedInNew(mctx, offer, wants[i], inside[k])
			if err != nil && !ports.IsRefusal(err) {
				break // it could not be read: what a plan says of them is what Create makes first
			}
			out[i].refusal = err
		}
		cancel()
	}
	batch := &insideBatch{each: each, available: available, offer: offer, byLogin: byLogin, pastDrift: pastDrift, schemaOwner: s.schemaOwner}
	boundedEach(len(deep), cap(b.conns.slots), func(j int) {
		k := deep[j]
		i := index[k]
		out[i] = b.checkInside(ctx, batch, ps[i], wants[i], seen[k], inside[k], drift[k])
		answered(1)
	})
	for k, i := range index {
		if out[i].Err == nil {
			out[i].Lacks = lacks[k]
		}
	}
}

// insideBatch is what the checks inside databases of one batch share: the time each has from
// when it has its slot, whether one timed out (after which none asks), the extensions the
// server has at their default versions, what it offers of them, read once, whether
// passwords are checked by logging in (the provider may not read them: powers), and whether
// the check goes on past drift (a plan's: weigh).
type insideBatch struct {
	each        time.Duration
	timedOut    atomic.Bool
	available   map[string]string
	offer       *offerings
	byLogin     bool
	pastDrift   bool
	schemaOwner string // who must own the provider's schema, in a refusal's words (powers)
}

// checkInside checks one consumer inside its database (and, for a provider that is not a
// superuser, its password by logging in), in one of the slots, within the batch's each from
// when it has one; once one of the batch timed out, it asks nothing. drift is what the catalog
// found of it, where a plan goes on past it (the login is then not asked: the catalog's drift
// makes it a repair already); a plan goes on past a stale password too.
func (b *Backend) checkInside(ctx context.Context, batch *insideBatch, p ports.Provision, w wanted, o observed, names []string, drift []change) (out checked) {
	defer func() {
		if out.Err != nil && len(drift) > 0 { // a plan's look past drift that could not be made: the drift is its answer
			out = checked{changes: drift}
		}
	}()
	each, timedOut := batch.each, &batch.timedOut
	var release func()
	var err error
	if !timedOut.Load() {
		release, err = b.conns.slot(ctx) // its turn; its deadline starts once it has it
	}
	switch {
	case err != nil:
		out.Err = checkErr(err, "check extensions in %s", w.database)
		return out
	case release == nil || timedOut.Load():
		if release != nil {
			release()
		}
		out.Err = fmt.Errorf("check extensions in %s: %w", w.database, ports.ErrNotAsked)
		return out
	}
	dctx, cancel := context.WithTimeout(ctx, each)
	defer cancel()
	slot := release
	release = func() {
		// A check that timed out says so before its slot is free: the check that waits for the
		// slot must find it so, and not start (it did, under load, where a connect timed out).
		if pastDeadline(dctx) && ctx.Err() == nil {
			timedOut.Store(true)
		}
		slot()
	}
	if batch.byLogin && p.Login && len(drift) == 0 {
		ok, err := b.conns.logsIn(dctx, w.database, w.role, p.Password)
		if !ok && err == nil {
			drift = []change{{kind: passwordStale}}
		}
		last := err != nil || !ok && !batch.pastDrift || len(names) == 0 // nothing more is asked
		if last {
			release()
		}
		switch {
		case err != nil:
			if pastDeadline(dctx) && ctx.Err() == nil {
				timedOut.Store(true)
			}
			out.Err = checkErr(err, "check the password of %s by logging in", w.role)
			return out
		case last:
			out.changes = drift
			return out
		}
	}
	out, err = b.inDatabase(dctx, w, names, batch, release)
	if err != nil {
		if pastDeadline(dctx) && ctx.Err() == nil {
			timedOut.Store(true)
		}
		return checked{Checked: ports.Checked{Err: checkErr(err, "check extensions in %s", w.database)}}
	}
	out.changes = slices.Concat(drift, out.changes)
	if !o.searchPath {
		out.changes = append(out.changes, change{kind: searchPathUnset})
	}
	return out
}

// pastDeadline is whether ctx's deadline has passed: by the clock, not only by ctx.Err(), which
// its timer sets a moment later. A connect's socket times out at the deadline itself, and
// under load the check can fail and free its slot before the timer has run: the check waiting
// for the slot must still find it timed out (issue 40's contract run, beside CI).
func pastDeadline(ctx context.Context) bool {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return true
	}
	deadline, ok := ctx.Deadline()
	return ok && !time.Now().Before(deadline)
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

// inDatabase is what the check finds inside the consumer's database: the provider's schema
// (owned by a superuser, the consumer's role may use it and nobody else create in it), each of
// names installed and at which version against the one wanted (the pin, else the server's
// default), and the extensions kept that it no longer names; read as a create reads it
// (readInside), in one round trip on a read-only connection of its own in the slot release
// gives back, and where a version differs, completed with what the server offers of it, read
// once for the batch.
func (b *Backend) inDatabase(ctx context.Context, w wanted, names []string, batch *insideBatch, release func()) (checked, error) {
	var h checked
	conn, err := b.conns.openIn(ctx, w.database, true, release)
	if err != nil {
		return h, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	wants := make([]string, len(names))
	for i, x := range names {
		wants[i] = w.want(x, batch.available[x])
	}
	in, err := readInside(ctx, conn.Conn, w.role, insideAsks{names: names, wants: wants, kept: true, entry: w.extensions}, batch.offer)
	if err != nil {
		return h, err
	}
	if !in.schema.safe() {
		h.changes = append(h.changes, change{kind: schemaUnsafe})
	}
	h.refusal = in.refusal(w.database, batch.schemaOwner)
	if h.refusal == nil { // what Create would refuse to make there, as it would
		refusal := refusedMaking(ctx, batch.offer.catalog, w.database, in.named, in.present)
		if refusal != nil && !ports.IsRefusal(refusal) {
			return h, refusal // the server's offer could not be read
		}
		h.refusal = refusal
	}
	var missing []change
	missing, h.Updates, h.Has = b.ext.versionsHeld(w.role, in.named)
	h.changes = append(h.changes, missing...)
	for _, x := range in.kept {
		h.Kept = append(h.Kept, "extension "+x+" kept: no longer named, never dropped")
	}
	return h, nil
}

// refusedInNew is refusedMaking for a consumer whose database Create is yet to make: each of
// names, at the version it wants, in a database where nothing is installed that the rule weighs
// (a copy of template1, of which what an operator installed there is not seen). offer is what
// the server offers, read once for the batch.
func refusedInNew(ctx context.Context, offer *offerings, w wanted, names []string) error {
	all, err := offer.catalog(ctx)
	if err != nil {
		return err
	}
	named := make([]installed, len(names))
	for i, x := range names {
		want := w.want(x, all[x].def)
		named[i] = installed{name: x, want: want, known: slices.Contains(all[x].versions, want)}
	}
	return refusedMaking(ctx, offer.catalog, w.database, named, nil)
}

// has is whether m has the key k.
func has[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}
