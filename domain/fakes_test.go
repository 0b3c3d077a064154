package domain_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/matryer/is"
	"github.com/spf13/afero"

	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
	"github.com/novox/postgres-provider/tests/backendtest"
)

const receives = "/run/mesh/contributions.json"

var ctx = context.Background()

// fakeBackend is a model of a backend: what Create made is held, and recorded as managed, until
// Remove withdraws it (recorded withdrawn, since the fake's clock says) or Drop takes it and its
// record, or a test takes it behind the loop's back (lose). It records every call, and answers
// with the errors a test gives it.
type fakeBackend struct {
	mu         sync.Mutex
	now        func() time.Time           // the backend's clock; time.Now where nil
	store      map[string]made            // what Create made, by login
	holders    map[string]map[string]bool // the logins in store, by their database (holder's index; nil: not built yet)
	outside    map[string]bool            // logins it did not make, by whether they hold more than it gives
	creates    []ports.Provision
	removes    []string
	drops      []string
	holdsCalls []string
	batches    int // HoldsAll calls
	managed    int // Managed calls
	standing   int // Standing calls
	foresees   int // Foresee calls

	broken     bool                                               // Create does not produce what holds checks
	holdsErr   error                                              // holds' error
	holdsFn    func(ctx context.Context, p ports.Provision) error // runs inside holds when set
	createErr  map[string]error                                   // by login
	createFn   func(ctx context.Context, p ports.Provision)       // runs inside Create when set
	removeErr  error
	dropErr    error
	managedErr error

	timeout func(context.Context, time.Duration) (context.Context, context.CancelFunc) // the clock's WithTimeout

	// Staged changes, as a backend with extensions has them: due by login (what a check
	// reports), the keys each holds, the keys whose making fails (and the backend's reason),
	// and who was let make which (in order).
	due        map[string][]ports.Update
	has        map[string][]string
	failUpdate map[string]string
	updated    []string

	// byLogin models delegated mode: a password is checked only by a login the loop granted
	// (Provision.Login); logins are the checks granted one, in order, whichever the mode.
	byLogin bool
	logins  []login
	// looks are the checks that looked inside (Provision.SkipInside unset), in order.
	looks []login

	adoptsNothing bool // refuses every login it did not make, as a backend without adoption

	unavailable map[string]bool // extensions it does not make: what names them lacks them
}

// lacks is what p lacks of what it asks for (Holding.Lacks), b.mu held: each extension it names
// that the fake does not make.
func (b *fakeBackend) lacks(p ports.Provision) []string {
	xs, _ := p.Extensions()
	var out []string
	for _, x := range xs {
		if b.unavailable[x.Name] {
			out = append(out, "extension "+x.Name+": not available on this server")
		}
	}
	return out
}

// login is one login a check made: who, and when by the backend's clock.
type login struct {
	as string
	at time.Time
}

var _ ports.LoginChecker = (*fakeBackend)(nil)

// ChecksByLogin is whether the fake models delegated mode.
func (b *fakeBackend) ChecksByLogin() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.byLogin
}

// made is what the fake holds of one consumer.
type made struct {
	p         ports.Provision
	withdrawn bool
	since     time.Time
	joined    bool // a member of another login, and another a member of it
	// insideGone is what is inside it changed behind the backend's back (an extension dropped
	// by hand): found only by a check that looks inside; Create makes it again.
	insideGone bool
}

var _ ports.Backend = (*fakeBackend)(nil)

func (b *fakeBackend) clock() time.Time {
	if b.now != nil {
		return b.now()
	}
	return time.Now()
}

func (b *fakeBackend) Create(ctx context.Context, p ports.Provision) (ports.Act, error) {
	if b.createFn != nil {
		b.createFn(ctx, p)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.creates = append(b.creates, p)
	if err := b.createErr[p.As]; err != nil {
		return ports.ActRefuse, err
	}
	f := b.foresee(p)
	if f.Act == ports.ActRefuse {
		return f.Act, b.refusal(p)
	}
	delete(b.outside, p.As) // adopted, where it was made elsewhere
	if err := b.update(p); err != nil {
		return ports.ActRepair, err
	}
	b.keep(p.As, made{p: p})
	if lacks := b.lacks(p); len(lacks) > 0 {
		return f.Act, &ports.Incomplete{Lacks: lacks}
	}
	return f.Act, nil
}

// databaseOf is the database p asks for, as the PostgreSQL backend names it.
func databaseOf(p ports.Provision) string {
	for _, v := range []any{p.Derived["database"], p.Values["name"]} {
		if s, ok := v.(string); ok && s != "" {
			return s
		}
	}
	return p.As
}

// hasIt is Create's refusal of a database another consumer has.
func hasIt(db, as string) error {
	return fmt.Errorf("create database %s: consumer %s has it; one database is never given to two consumers: %w", db, as, ports.ErrRefused)
}

// Clashes refuses each of ps that asks for the database of an earlier one.
func (b *fakeBackend) Clashes(ps []ports.Provision) []error {
	out := make([]error, len(ps))
	first := map[string]string{}
	for i, p := range ps {
		db := databaseOf(p)
		if as, ok := first[db]; ok && as != p.As {
			out[i] = hasIt(db, as)
		} else if !ok {
			first[db] = p.As
		}
	}
	return out
}

// holder is the consumer, not p's, that has p's database, "" where none does; b.mu held.
func (b *fakeBackend) holder(p ports.Provision) string {
	for as := range b.byDatabase()[databaseOf(p)] {
		if as != p.As {
			return as
		}
	}
	return ""
}

// keep stores what was made for as, and indexes it by its database; a write that keeps the
// database may go to the store directly.
func (b *fakeBackend) keep(as string, m made) {
	if b.store == nil {
		b.store = map[string]made{}
	}
	b.forget(as)
	b.store[as] = m
	b.index(as, m)
}

// forget takes as from the store and its index.
func (b *fakeBackend) forget(as string) {
	if m, ok := b.store[as]; ok {
		delete(b.byDatabase()[databaseOf(m.p)], as)
	}
	delete(b.store, as)
}

// byDatabase is the logins in the store by their database, built at its first use (a fake made
// with a store has none yet).
func (b *fakeBackend) byDatabase() map[string]map[string]bool {
	if b.holders == nil {
		b.holders = map[string]map[string]bool{}
		for as, m := range b.store {
			b.index(as, m)
		}
	}
	return b.holders
}

// index adds as, which holds m, to byDatabase.
func (b *fakeBackend) index(as string, m made) {
	db := databaseOf(m.p)
	if b.holders[db] == nil {
		b.holders[db] = map[string]bool{}
	}
	b.holders[db][as] = true
}

// refusal is Create's error for what foresee refuses.
func (b *fakeBackend) refusal(p ports.Provision) error {
	if p.Password == "" {
		return fmt.Errorf("create role %s: the minted password is empty: %w", p.As, ports.ErrInvalid)
	}
	if as := b.holder(p); as != "" {
		return hasIt(databaseOf(p), as)
	}
	return fmt.Errorf("role %s exists, the provider did not make it, and it is a member of others; it is not taken over: %w",
		p.As, ports.ErrRefused)
}

// foresee is what Create would do for p, b.mu held: the fake's one rule, which Create follows
// and Foresee answers.
func (b *fakeBackend) foresee(p ports.Provision) ports.Foresight {
	powerful, outside := b.outside[p.As]
	_, made := b.store[p.As]
	switch {
	case p.Password == "" || outside && (powerful || b.adoptsNothing) || b.holder(p) != "":
		return ports.Foresight{Act: ports.ActRefuse, Why: []string{b.refusal(p).Error()}}
	case outside:
		return ports.Foresight{Act: ports.ActAdopt, Why: []string{"password", "comment (the record)"}}
	case !made:
		return ports.Foresight{Act: ports.ActCreate, Why: []string{"role " + p.As}}
	}
	h := b.holding(p, true, true)
	if !h.Held {
		return ports.Foresight{Act: ports.ActRepair, Why: h.Drift, Updates: h.Updates, Kept: h.Kept, Lacks: h.Lacks}
	}
	return ports.Foresight{Act: ports.ActNone, Updates: h.Updates, Kept: h.Kept, Lacks: h.Lacks}
}

// Foresee answers foresee for each of ps; the test's holdsErr stands for a backend that
// cannot be asked.
func (b *fakeBackend) Foresee(_ context.Context, ps []ports.Provision, _ time.Duration) []ports.Foresight {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.foresees++
	out := make([]ports.Foresight, len(ps))
	for i, p := range ps {
		if b.holdsErr != nil {
			out[i].Err = b.holdsErr
			continue
		}
		out[i] = b.foresee(p)
	}
	return out
}

func (b *fakeBackend) Remove(_ context.Context, as string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.removes = append(b.removes, as)
	if b.removeErr != nil {
		return b.removeErr
	}
	if m, ok := b.store[as]; ok && !m.withdrawn {
		b.store[as] = made{p: m.p, withdrawn: true, since: b.clock()}
	}
	return nil
}

func (b *fakeBackend) Drop(_ context.Context, as string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.drops = append(b.drops, as)
	if b.dropErr != nil {
		return b.dropErr
	}
	if _, ok := b.outside[as]; ok {
		return fmt.Errorf("role %s is not in the record of what the provider manages; it is not withdrawn", as)
	}
	b.forget(as)
	return nil
}

func (b *fakeBackend) holds(ctx context.Context, p ports.Provision) (ports.Holding, error) {
	if b.holdsFn != nil {
		if err := b.holdsFn(ctx, p); err != nil {
			return ports.Holding{}, err
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.holdsCalls = append(b.holdsCalls, p.As)
	if b.holdsErr != nil {
		return ports.Holding{}, b.holdsErr
	}
	if p.Login {
		b.logins = append(b.logins, login{as: p.As, at: b.clock()})
	}
	if !p.SkipInside {
		b.looks = append(b.looks, login{as: p.As, at: b.clock()})
	}
	return b.holding(p, !b.byLogin || p.Login, !p.SkipInside), nil
}

// holding is what the fake holds of p, b.mu held; its password is compared where password, and
// what is inside (a change there, its staged changes) is looked at where inside.
func (b *fakeBackend) holding(p ports.Provision, password, inside bool) ports.Holding {
	m, ok := b.store[p.As]
	// What a backend holds is what the loop hashes; where the consumer runs is not part of it.
	var drift []string
	switch {
	case !ok:
		drift = append(drift, "missing")
	case m.withdrawn:
		drift = append(drift, "withdrawn")
	case b.broken:
		drift = append(drift, "what create makes")
	case m.joined:
		drift = append(drift, "member of intruder", "granted to intruder")
	}
	if ok && m.p.Password != p.Password && password {
		drift = append(drift, "password")
	}
	if ok && (!reflect.DeepEqual(m.p.Values, p.Values) || !reflect.DeepEqual(m.p.Derived, p.Derived)) {
		drift = append(drift, "values")
	}
	if !inside {
		return ports.Holding{Held: len(drift) == 0, Drift: drift, Lacks: b.lacks(p)}
	}
	if ok && m.insideGone {
		drift = append(drift, "inside")
	}
	return ports.Holding{Held: len(drift) == 0, Drift: drift, Updates: slices.Clone(b.due[p.As]), Has: slices.Clone(b.has[p.As]),
		Lacks: b.lacks(p)}
}

// update makes the staged changes p lets Create make, b.mu held: each is made, or fails as
// failUpdate says and leaves the consumer as it was.
func (b *fakeBackend) update(p ports.Provision) error {
	for _, key := range p.Updates {
		i := slices.IndexFunc(b.due[p.As], func(u ports.Update) bool { return u.Key == key })
		if i < 0 {
			continue
		}
		u := b.due[p.As][i]
		if why := b.failUpdate[key]; why != "" {
			return fmt.Errorf("create %s: %w", p.As, &ports.UpdateFailed{Update: u, Reason: why})
		}
		b.due[p.As] = slices.Delete(b.due[p.As], i, i+1)
		if b.has == nil {
			b.has = map[string][]string{}
		}
		b.has[p.As] = append(b.has[p.As], key)
		b.updated = append(b.updated, p.As)
	}
	return nil
}

// HoldsAll asks holds of each in order, each bounded by its own timeout, as a backend that
// checks one consumer after another would; once the context is over, the rest are not asked,
// and once one check timed out, the rest are answered ErrNotAsked, as the contract says.
func (b *fakeBackend) HoldsAll(ctx context.Context, ps []ports.Provision, each time.Duration) []ports.Checked {
	b.mu.Lock()
	b.batches++
	b.mu.Unlock()
	out := make([]ports.Checked, len(ps))
	timedOut := false
	for i, p := range ps {
		if err := ctx.Err(); err != nil {
			out[i].Err = err
			continue
		}
		if timedOut {
			out[i].Err = fmt.Errorf("check %s: %w", p.As, ports.ErrNotAsked)
			continue
		}
		cctx, cancel := b.withTimeout(ctx, each)
		out[i].Holding, out[i].Err = b.holds(cctx, p)
		timedOut = errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
		cancel()
		ports.Answered(ctx, 1) // as each is answered, as the contract says
	}
	return out
}

// withTimeout is set by the world to the mock clock's; context.WithTimeout where nil.
func (b *fakeBackend) withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if b.timeout != nil {
		return b.timeout(ctx, d)
	}
	return context.WithTimeout(ctx, d)
}

func (b *fakeBackend) Managed(context.Context) ([]ports.Managed, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.managed++
	if b.managedErr != nil {
		return nil, b.managedErr
	}
	out := make([]ports.Managed, 0, len(b.store))
	for as, m := range b.store {
		out = append(out, ports.Managed{As: as, Withdrawn: m.withdrawn, Since: m.since})
	}
	return out, nil
}

// Standing fails as Managed does, without the record.
func (b *fakeBackend) Standing(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.standing++
	return b.managedErr
}

// world is what a contract test does behind the fake's back.
func (b *fakeBackend) world() backendtest.World {
	outside := func(powerful bool) func(*testing.T, string) {
		return func(_ *testing.T, as string) {
			b.mu.Lock()
			defer b.mu.Unlock()
			if b.outside == nil {
				b.outside = map[string]bool{}
			}
			b.outside[as] = powerful
		}
	}
	return backendtest.World{
		Join: func(_ *testing.T, as string) {
			b.mu.Lock()
			defer b.mu.Unlock()
			m := b.store[as]
			m.joined = true
			b.store[as] = m
		},
		Plain:    outside(false),
		Powerful: outside(true),
	}
}

// lose takes a consumer away behind the loop's back, as a person dropping its role would.
func (b *fakeBackend) lose(as string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.forget(as)
}

// createsOf counts the creates for one login.
func (b *fakeBackend) createsOf(as string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, p := range b.creates {
		if p.As == as {
			n++
		}
	}
	return n
}

func (b *fakeBackend) lastCreate() ports.Provision {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.creates[len(b.creates)-1]
}

// fakeLogger keeps every entry: those a logger at the info level writes, and apart, the
// debug lines.
type fakeLogger struct {
	mu      sync.Mutex
	entries []ports.Entry
	debugs  []ports.Entry
}

func (l *fakeLogger) Log(e ports.Entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.Level < slog.LevelInfo {
		l.debugs = append(l.debugs, e)
		return
	}
	l.entries = append(l.entries, e)
}

// lines are the spec's lines said so far (not the audit trail's, nor debug lines); take drops
// every entry, so that a test can look at one pass.
func (l *fakeLogger) lines() []string {
	return l.messages(func(e ports.Entry) bool { return e.Event == "" })
}

// audit is the audit trail said so far.
func (l *fakeLogger) audit() []string {
	return l.messages(func(e ports.Entry) bool { return e.Event != "" })
}

func (l *fakeLogger) messages(which func(ports.Entry) bool) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.entries))
	for _, e := range l.entries {
		if which(e) {
			out = append(out, e.Message)
		}
	}
	return out
}

func (l *fakeLogger) take() []string {
	out := l.lines()
	l.mu.Lock()
	l.entries = nil
	l.mu.Unlock()
	return out
}

// count is how many lines said so far contain part.
func (l *fakeLogger) count(part string) int {
	n := 0
	for _, line := range l.lines() {
		if strings.Contains(line, part) {
			n++
		}
	}
	return n
}

// entry is one item of the contributions file's given list.
type entry map[string]any

func consumer(as, secret string) entry {
	return entry{"as": as, "secret": secret, "node": as, "at": "10.0.0.7",
		"values": map[string]any{"name": as, "extensions": []any{"vector"}}}
}

// changingFs is an in-memory filesystem that keeps, as a real one does, when each file last
// changed: every write, rename, chmod or change of times moves it, and nothing sets it back.
type changingFs struct {
	afero.Fs
	mu      sync.Mutex
	tick    int64
	changed map[string]int64
	opens   map[string]int // Open calls, by name
}

func newChangingFs() *changingFs {
	return &changingFs{Fs: afero.NewMemMapFs(), changed: map[string]int64{}, opens: map[string]int{}}
}

func (f *changingFs) Open(name string) (afero.File, error) {
	f.mu.Lock()
	f.opens[name]++
	f.mu.Unlock()
	return f.Fs.Open(name)
}

func (f *changingFs) opened(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opens[name]
}

func (f *changingFs) touch(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tick++
	f.changed[name] = f.tick
}

func (f *changingFs) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0 {
		f.touch(name)
	}
	return f.Fs.OpenFile(name, flag, perm)
}

func (f *changingFs) Create(name string) (afero.File, error) {
	f.touch(name)
	return f.Fs.Create(name)
}

func (f *changingFs) Rename(from, to string) error {
	f.touch(to)
	return f.Fs.Rename(from, to)
}

func (f *changingFs) Chmod(name string, mode os.FileMode) error {
	f.touch(name)
	return f.Fs.Chmod(name, mode)
}

func (f *changingFs) Chtimes(name string, atime, mtime time.Time) error {
	f.touch(name)
	return f.Fs.Chtimes(name, atime, mtime)
}

// Identity is the file's change time; the in-memory filesystem has no inodes.
func (f *changingFs) Identity(name string, _ os.FileInfo) (uint64, int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return 0, f.changed[name]
}

// world is one loop with its fakes.
type world struct {
	t       *testing.T
	fs      *changingFs
	clk     *clock.Mock
	backend *fakeBackend
	log     *fakeLogger
	lease   ports.Lease
	h       *domain.Harness
}

func newWorld(t *testing.T) *world {
	t.Helper()
	clk := clock.NewMock()
	w := &world{t: t, fs: newChangingFs(), clk: clk, log: &fakeLogger{},
		backend: &fakeBackend{now: clk.Now, timeout: clk.WithTimeout}}
	w.configure(domain.Config{})
	return w
}

// configure makes the world's loop anew with cfg, its resource and file filled in; what the
// backend holds stays.
func (w *world) configure(cfg domain.Config) {
	cfg.Resource, cfg.Receives = "postgres", receives
	w.h = domain.New(cfg, w.fs, w.clk, w.backend, w.lease, w.log)
}

// newApplied is a world in which letta, listed with its secret, was applied by a first pass.
func newApplied(t *testing.T) *world {
	t.Helper()
	w := newWorld(t)
	w.write("/s/letta", "pw")
	w.contributions(consumer("letta", "/s/letta"))
	w.pass(0)
	return w
}

// contributions writes the file with the given entries.
// list writes a secret "pw" for each of names and lists them, in that order, with consumer's
// entry.
func (w *world) list(names ...string) {
	w.t.Helper()
	entries := make([]entry, len(names))
	for i, as := range names {
		w.write("/s/"+as, "pw")
		entries[i] = consumer(as, "/s/"+as)
	}
	w.contributions(entries...)
}

func (w *world) contributions(entries ...entry) {
	w.t.Helper()
	given := make([]any, len(entries))
	for i, e := range entries {
		given[i] = e
	}
	raw, err := json.Marshal(map[string]any{"requirement": "postgres", "given": given})
	is.New(w.t).NoErr(err) // contributions marshal
	w.write(receives, string(raw))
}

func (w *world) write(path, content string) {
	w.t.Helper()
	is.New(w.t).NoErr(afero.WriteFile(w.fs, path, []byte(content), 0o600)) // write file
}

func (w *world) remove(path string) {
	w.t.Helper()
	is.New(w.t).NoErr(w.fs.Remove(path)) // remove file
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// pass runs one Reconcile after moving the clock on by d.
func (w *world) pass(d time.Duration) domain.Report {
	if d > 0 { // Mock.Add yields for a millisecond even when d is zero
		w.clk.Add(d)
	}
	return w.h.Reconcile(ctx)
}

// The fake keeps the contract the real backends keep.
func TestFakeBackendKeepsTheContract(t *testing.T) {
	n := 0
	b := &fakeBackend{}
	backendtest.Run(t, b, func() ports.Provision {
		n++
		as := fmt.Sprintf("consumer%d", n)
		return ports.Provision{As: as, Password: "pw", Values: map[string]any{"name": as}, Derived: map[string]any{}}
	}, b.contractWorld())
}

// The fake keeps the contract as a backend that checks passwords by logging in.
func TestFakeBackendByLoginKeepsTheContract(t *testing.T) {
	n := 0
	b := &fakeBackend{byLogin: true}
	backendtest.Run(t, b, func() ports.Provision {
		n++
		as := fmt.Sprintf("consumer%d", n)
		return ports.Provision{As: as, Password: "pw", Values: map[string]any{"name": as}, Derived: map[string]any{}}
	}, b.contractWorld())
}
