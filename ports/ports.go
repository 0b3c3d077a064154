// Package ports declares what the reconcile loop needs from the world: a filesystem to read the
// contributions file and secrets from, a clock, a backend that provisions consumers and keeps a
// record of what it manages, a lease that says whether this replica may act, and a logger. It
// holds interfaces and the plain data that crosses them, nothing else.
//
// "Port" here means a driven port: an interface the domain calls and an adapter implements.
package ports

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/spf13/afero"
)

// Provision is one consumer's resource to bring into being: everything the mesh derived and
// delivered for it.
type Provision struct {
	// As is the login the mesh derived and gave the consumer to present.
	As string
	// Password is the one the mesh minted, read from the consumer's secret file.
	Password string
	// Values are what the consumer contributed, e.g. {"name": "letta", "extensions": ["vector"]}.
	Values map[string]any
	// Derived is what this provider's own definition derived for the consumer, e.g.
	// {"database": "letta"}.
	Derived map[string]any
	// At is where the consumer is.
	At string
	// Node is the consumer's node.
	Node string
	// Updates are the keys (Update.Key) of the staged changes Create may make for this
	// consumer now; it leaves every other staged change as it is. The loop sets it.
	Updates []string
	// Login is whether HoldsAll checks the password by logging in as the consumer, where that
	// is how the backend checks it (a provider that cannot read stored verifiers): a login
	// costs the server a backend and a key derivation, so the loop grants them on a budget of
	// their own. Where it is false, such a backend takes the password as held and checks all
	// else; a backend that checks the password otherwise checks it either way. The loop sets it.
	Login bool
	// SkipInside is whether HoldsAll takes what is inside what the backend made for the
	// consumer (its database: the extensions there, their versions, the schema they live in)
	// as it last found it, and checks only the rest: a look inside costs the server a
	// connection to each database, so the loop grants such looks on a budget of their own. Such
	// a check says nothing of what is inside: no drift found there, no staged change (Updates,
	// Has) and nothing kept. Its zero value looks everywhere. The loop sets it.
	SkipInside bool
}

// Act is what Create does, or would do, for one consumer; a plan of a pass names each consumer's
// act with the same words, and with the loop's own acts below, so that the words are declared once.
type Act string

// The acts of Create, and of Foresee.
const (
	// ActNone: held as asked; nothing to do.
	ActNone Act = ""
	// ActCreate: nothing of it exists.
	ActCreate Act = "create"
	// ActAdopt: a role exists that no record names, and the adoption rule lets the provider
	// take it over.
	ActAdopt Act = "adopt"
	// ActRepair: the provider's, and not as asked.
	ActRepair Act = "repair"
	// ActRefuse: exists and is not the provider's to take, or asks what cannot be made.
	ActRefuse Act = "refuse"
)

// The acts a plan names that the loop decides, not the backend: no Create or Foresee answers them.
const (
	// ActUpdate: held as asked but for staged changes it is due (an extension's newer version).
	ActUpdate Act = "update"
	// ActWithdraw: no longer listed, still active: its login is taken away, its data kept.
	ActWithdraw Act = "withdraw"
	// ActDrop: no longer listed, and dropped with its data.
	ActDrop Act = "drop"
	// ActWait: listed, and its secret cannot be used yet: nothing is done for it.
	ActWait Act = "wait"
)

// Holding is what a check of one consumer found.
type Holding struct {
	// Held is whether the backend holds the consumer exactly as asked.
	Held bool
	// Drift names what differs where it is not held, in words an operator reads, e.g.
	// "password", "connection limit", "extension vector missing". It is empty when Held.
	// Staged changes are not drift: they are Updates.
	Drift []string
	// Updates are the staged changes the consumer is due (an extension's newer version),
	// which Create makes only where Provision.Updates names them. They do not make it unheld.
	Updates []Update
	// Has are the keys of the staged changes it already holds (its extension at the wanted
	// version): what tells the loop a change is no longer new to this provider.
	Has []string
	// Kept says what the backend keeps for it that its entry no longer names (an extension,
	// which may hold its data, is never dropped), in words an operator reads.
	Kept []string
	// Lacks says what its entry asks for that the backend does not make for it (an extension
	// the server does not have, one not allowed here, one the server refused to create), in
	// words an operator reads, e.g. "extension vector: not available on this server". It is
	// not drift (applying again does not make it) and does not make it unheld, but a consumer
	// that lacks something is not whole: the loop never shows it as applied.
	Lacks []string
}

// Update is a change a backend stages across its consumers rather than making at once for
// all (an extension's new version): what one consumer's check found of it.
type Update struct {
	// Key names the change alike for every consumer it is for, e.g. "extension vector ->
	// 0.8.6": a rollout is staged over it.
	Key string
	// Subject is what changes, e.g. "extension vector"; From and To the versions, e.g.
	// "0.8.0" and "0.8.6" (From is "" where nothing is installed).
	Subject, From, To string
	// Word is the drift in an operator's words, e.g. "extension vector 0.8.0, wanted 0.8.6".
	Word string
	// Step is what making it does, e.g. "update vector 0.8.0 -> 0.8.6"; Done says it made,
	// e.g. "extension vector updated 0.8.0 -> 0.8.6".
	Step, Done string
	// Refused is why the backend cannot make it (no update path, a downgrade, a version the
	// server does not have); empty where it can. A refused change is never made.
	Refused string
	// Offer is what the backend offers for it (the server's available versions): a change to
	// it may have fixed what made it fail.
	Offer string
}

// UpdateFailed is Create's error where a staged change it was let make failed on the backend
// (an extension's update script errors): the consumer keeps what it had, and the rest of what
// Create does was done. Told apart with errors.As.
type UpdateFailed struct {
	// Update is the change that failed.
	Update Update
	// Reason is the backend's own.
	Reason string
}

func (e *UpdateFailed) Error() string { return e.Update.Step + ": " + e.Reason }

// Incomplete is Create's error where everything it could make was made, and what the entry
// asks for that the backend does not make for it (Holding.Lacks' words) is missing: the consumer
// is created, not whole. A caller that does not know it takes it as a failure, never as done.
// Told apart with errors.As.
type Incomplete struct {
	Lacks []string
}

func (e *Incomplete) Error() string { return "incomplete: lacks " + strings.Join(e.Lacks, "; ") }

// DropHeld is a drop the backend holds back until what must come first is done: its archive
// (the backend's own, taken in the background, so that the pass does not wait for it). Nothing
// was dropped; the loop calls Drop again. While Failed is false the archive is under way (since
// Since); where it is true, Reason says why it failed, and the next Drop tries again. Told apart
// with errors.As.
type DropHeld struct {
	Reason string
	Failed bool
	Since  time.Time
}

func (e *DropHeld) Error() string { return "drop held: " + e.Reason }

// Checked is one consumer's answer in a batch of checks.
type Checked struct {
	Holding
	// Err is set where the backend could not be asked about this consumer; Holding is then
	// meaningless.
	Err error
}

// Foresight is what Create would do for one consumer, found without changing anything.
type Foresight struct {
	// Act is what Create would do.
	Act Act
	// Why says, in words an operator reads: for ActRepair what drifted ("password",
	// "extension vector missing"); for ActAdopt what taking it over changes ("password",
	// "comment (the record)"); for ActRefuse the reason Create would give; for ActCreate what
	// is made.
	Why []string
	// Updates are the staged changes the consumer is due, and Kept what is kept that its
	// entry no longer names, as a check (Holding) says them.
	Updates []Update
	Kept    []string
	// Lacks is what it would lack after Create, as a check (Holding) says it.
	Lacks []string
	// Err is set where the backend could not be asked about this consumer; Act and Why are
	// then meaningless.
	Err error
}

// Managed is one consumer in the backend's record of what this provider manages.
type Managed struct {
	// As is the consumer's login.
	As string
	// Withdrawn is whether it was withdrawn: its login taken away, its data kept.
	Withdrawn bool
	// Since is when it was withdrawn; zero while it is active.
	Since time.Time
}

// Backend is the resource a provider brings into being for each consumer, and the record of
// which consumers it manages. The record lives with the resource, not in the provider's memory:
// it outlives restarts, crashes and the replica that wrote it.
type Backend interface {
	// Create brings p into being, or back to exactly what p says, and records it as managed
	// and active, in one step that never leaves what it made unrecorded. It is idempotent:
	// repeating it, or racing it with itself for the same consumer, leaves one correct
	// resource. It refuses what exists and is not the provider's to take over. It answers what
	// it did: ActCreate (it made the login), ActAdopt (it took over a login no record named),
	// ActRepair (the provider's own, and something was changed), or ActNone (already exactly as
	// asked; a backend that cannot tell cheaply answers ActRepair). Its act is meaningless
	// where it fails. It makes the staged changes p.Updates names, and no other; one that fails
	// on the backend is a *UpdateFailed, after the rest was done. Where the entry asks for what
	// the backend does not make for it (Holding.Lacks), the error is an *Incomplete, after the
	// rest was done.
	Create(ctx context.Context, p Provision) (Act, error)
	// Remove withdraws the login as: it can no longer be used, what it holds is kept, and the
	// record marks it withdrawn. What it holds is the backend's own record's to say. Removing
	// what is already withdrawn or gone is not an error.
	Remove(ctx context.Context, as string) error
	// Drop removes everything Create made for the login as, as its record says, and the
	// record. Dropping what is already gone is not an error.
	Drop(ctx context.Context, as string) error
	// HoldsAll reports, for each consumer of ps and in their order, whether the backend still
	// holds it exactly as asked, and what drifted where it does not; an answer's Err means the
	// backend could not be asked about that consumer, not that it is lost. each bounds the
	// check of any one consumer, from when that check starts (not while it waits its turn).
	// Once a check has timed out, the checks not yet started are not made: their answers' Err
	// wraps ErrNotAsked. It changes nothing. As checks are answered it tells the CheckTrace
	// ctx carries (Answered), once for each at most.
	HoldsAll(ctx context.Context, ps []Provision, each time.Duration) []Checked
	// Foresee answers, in the order of ps, what Create would do for each, and changes nothing:
	// no write, no lock, no lease. A refusal's Why is the reason Create's error would give.
	// each bounds the look at any one consumer, as in HoldsAll.
	Foresee(ctx context.Context, ps []Provision, each time.Duration) []Foresight
	// Clashes answers, for each of ps in their order, nil, or where it asks for what an earlier
	// one of ps asks for too (the same database), the error Create gives once the earlier one
	// has it: of kind ErrRefused, naming the earlier consumer. It asks the backend nothing: the
	// loop refuses the later of two new consumers in file order, before any call.
	Clashes(ps []Provision) []error
	// Managed lists what the record says this provider manages, active or withdrawn. It is
	// also the check of the backend as a whole: an error means the record could not be read
	// (the backend unreachable, the provider not allowed, ...), and says why in words an
	// operator can act on; nothing may be withdrawn on its account.
	Managed(ctx context.Context) ([]Managed, error)
	// Standing is the check of the backend as a whole that Managed makes, without reading the
	// record: a pass whose only business is the part of some consumers' checks on a budget of
	// its own (a login, a look inside) asks this, and reads the record at the next pass that
	// needs it. Its error is the one Managed would give.
	Standing(ctx context.Context) error
}

// Archiving is a Backend that keeps an archive of what it drops, and brings it back
// (provisioner restore).
type Archiving interface {
	// Restore makes what Drop archived of the consumer as again, from its last archive, or from
	// the file from (a copy of one the record knows), withdrawn; it answers what it did, in
	// words an operator reads. It refuses where the consumer is active or what it would make
	// exists.
	Restore(ctx context.Context, as, from string) (string, error)
	// Archived counts the archives this process made and failed since it started.
	Archived() ArchiveCounts
	// Archives lists the archives the backend's record keeps (those not deleted), newest first.
	Archives(ctx context.Context) ([]Archive, error)
}

// Archive is one archive a drop left, as the backend's record keeps it.
type Archive struct {
	// As is the consumer's login, Database what was archived, Name and Place the archive and
	// where it is.
	As, Database, Name, Place string
	Size                      int64
	SHA256                    string
	Made                      time.Time
}

// ArchiveCounts are the archives a process made (Made, their Bytes, the Seconds they took) and
// those that failed, since it started.
type ArchiveCounts struct {
	Made, Failed int
	Bytes        int64
	Seconds      float64
}

// LoginChecker is a Backend that may check passwords by logging in as the consumers (a
// provider that cannot read stored verifiers), which costs the server a backend and a key
// derivation each: where ChecksByLogin answers true, the loop sets Provision.Login only for the
// consumers whose login check is due, on a budget of its own. A Backend that is not one, or
// answers false, has Login set on every check.
type LoginChecker interface {
	// ChecksByLogin is whether HoldsAll checks a password by logging in, as last found.
	ChecksByLogin() bool
}

// Lease says whether this replica may act: of several replicas of a provider, one holds the
// lease and acts, the others stand by.
type Lease interface {
	// Held answers nil while this replica holds the lease; an error that wraps ErrStandby
	// where another replica holds it; any other error where the lease could not be asked for
	// (the backend unreachable, ...), in words an operator can act on.
	Held(ctx context.Context) error
}

// ErrStandby is a replica that does not hold the lease because another does.
var ErrStandby = errors.New("another replica holds the lease")

// The kinds of a Backend's errors, which an adapter wraps (fmt.Errorf("...: %w", ErrRefused)) and
// the domain tells apart with errors.Is. An error of none of these kinds is taken as transient.
// What to do about an error (try again, back off, tell the operator) is the domain's to say: an
// adapter's text says what happened, never what happens next.
var (
	// ErrRefused is what exists on the backend and is not the provider's to take over (a role
	// it did not make that is a superuser, a database another role owns, ...): asking again
	// changes nothing until somebody changes the backend or the consumer's entry.
	ErrRefused = errors.New("refused")
	// ErrInvalid is what the consumer's entry asks for that the backend can never make (a
	// reserved or malformed name, a value of the wrong type): asking again changes nothing
	// until the entry changes.
	ErrInvalid = errors.New("invalid")
	// ErrTransient is what may well go away on its own (the server unreachable or busy, a lock
	// held by another session, a deadline): asked again on the next pass.
	ErrTransient = errors.New("transient")
)

// IsRefusal is whether err is a refusal (ErrRefused) or what the consumer's entry asks for that
// cannot be made (ErrInvalid), rather than trouble asking the backend: asking again changes
// nothing until the backend or the entry does.
func IsRefusal(err error) bool {
	return errors.Is(err, ErrRefused) || errors.Is(err, ErrInvalid)
}

// ErrInRecovery is a backend, or a Lease, that reached only a server in recovery (a standby,
// read only) where it must write: nothing can be created, checked or withdrawn until it is
// promoted or the connection names a primary. It comes with ErrTransient (a promotion ends
// it); the domain says it as the backend's problem, with that consequence.
var ErrInRecovery = errors.New("in recovery")

// SharedError is a Backend's error about one consumer whose cause others may meet at the same
// time (the server refusing connections to their databases, a standby where a primary was
// meant): Err is the error as it is, naming the consumer; Cause says the cause alone, naming no
// consumer, so that the loop says it once for all who met it rather than once each. Find it
// with errors.As.
type SharedError struct {
	Err   error
	Cause string
}

func (e *SharedError) Error() string { return e.Err.Error() }
func (e *SharedError) Unwrap() error { return e.Err }

// ErrNotAsked is HoldsAll's answer about a consumer it did not check because an earlier check
// timed out: a backend that timed out for one consumer is likely to for the next.
var ErrNotAsked = errors.New("not asked: an earlier check timed out")

// Filesystem is the part of afero.Fs the loop reads the contributions file and secrets through.
// Open must not block on what is not a regular file (a FIFO nobody writes would stall the loop
// for ever): the loop refuses such a file once it is open.
type Filesystem interface {
	Open(name string) (afero.File, error)
	Stat(name string) (os.FileInfo, error)
	// Identity is what fi, the state of the file name, says beyond its size and time: its
	// inode, and when the inode last changed (ctime, in nanoseconds), which every write moves
	// and no writer can set back (as touch and rsync set the modification time). changed is
	// zero where the filesystem does not say: the loop then reads the file whenever it looks.
	Identity(name string, fi os.FileInfo) (inode uint64, changed int64)
}

// Clock is the part of github.com/benbjohnson/clock the loop takes its time from.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
	AfterFunc(d time.Duration, f func()) *clock.Timer
	WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc)
}

// Entry is one line the provider says to its operator.
type Entry struct {
	// Level is how loud the line is: Info for progress, Warn for what a person may have to look at.
	Level slog.Level
	// Consumer is the login the line is about; empty for lines about the whole provider.
	Consumer string
	// Message is the line itself, without the "[provisioner:RESOURCE] " prefix, which the
	// Logger adds. Operators' alerts match on it word for word.
	Message string
	// Event names what a line of the audit trail records ("created", "adopted", "password
	// rotated", "updated", "reinstated", "repaired", "withdrawn", "dropped"); empty for the
	// other lines.
	Event string
	// Once, where set, makes the line a fact of its consumer that the loop says once: when its
	// Fact is new or differs from the one last said under the same key, and not again while it
	// holds. With an empty Message it says nothing and ends the fact: should it come back, it
	// is said again. A backend tells the facts; the loop keeps what was said and forgets it
	// with the consumer (domain.Told).
	Once *Once
}

// Once is what keys and dates a line said once (Entry.Once): which fact of the consumer it is
// (About, in the backend's words, and its Subject: an extension, a grant, a lock) and how it
// stands (Fact; the line's text may change while the fact does not). Outlives is whether it is
// kept when the consumer is withdrawn: true of what a withdrawal itself says, which each retry
// of it would say again.
type Once struct {
	About    string
	Subject  string
	Fact     string
	Outlives bool
}

// Logger is where the provider's lines go. Log must be safe for concurrent use.
type Logger interface {
	Log(e Entry)
}

// What a daemon needs of a backend beside what the loop does with it: a backend kind declares
// its own flags and opens itself (Kind), and an opened one says how it stands (Server). The
// daemon names no backend's types; it asks these.

// DefaultTimeout is how long one call to a Backend may take at most by default: long enough for
// a CREATE DATABASE on a busy server, short enough that a server that stopped answering does not
// stall the loop. A daemon counts its loop stuck from it.
const DefaultTimeout = 2 * time.Minute

// Kind is a kind of backend before it is opened: its own flags, which it registers on the
// daemon's flag set and checks, and how it opens a Backend from them.
type Kind interface {
	// Flags registers the kind's own flags on fs, each setting what the kind reads, which it
	// first sets to the flag's default.
	Flags(fs *flag.FlagSet)
	// Environ fills what neither the kind's flags nor their variables set from the
	// environment's conventions (env: KEY to value), e.g. DATABASE_URL.
	Environ(env map[string]string)
	// Check answers what is wrong with the kind's flags, as one line an operator acts on; nil
	// where nothing is.
	Check() error
	// Secrets are the passwords the kind's flags carry (in a connection string, in each form
	// it may take), which a message about them must not show: a parser or a driver may quote
	// the string it was given. The daemon scrubs them from what it says.
	Secrets() []string
	// Open opens a Backend of the kind from its flags and o. It does not connect: a server that
	// is down now is reached once it is up.
	Open(o Options) (Server, error)
}

// FlagOrder is a Kind that says the order --help lists its flags in (each flag's name).
type FlagOrder interface {
	FlagOrder() []string
}

// Described is a Kind that says in its own words what the daemon would otherwise have to know
// of it. A Kind that is not one serves the resource --resource names (no default), works with
// one connection, and is described in the plan's legend in general words.
type Described interface {
	// DefaultResource is the resource it serves where --resource does not say.
	DefaultResource() string
	// FewestConnections is the fewest connections it works with (--max-connections), and why,
	// in words that follow "want at least N".
	FewestConnections() (int, string)
	// Acts are its words for what an act does to a consumer, for the plan's legend
	// (ActCreate, ActAdopt): the text after the act's name, lines broken where it wants them.
	Acts() map[Act]string
	// Product is what --help's first line calls the provider ("the novox service mesh's
	// PostgreSQL provider").
	Product() string
	// LoginChecks is when its checks log in as each consumer (where --login-check-every and
	// --login-rate apply), the words that start those flags' usages; "" where they always do.
	LoginChecks() string
}

// Options are what a daemon gives any backend it opens, beside the backend's own flags.
type Options struct {
	// Resource is the requirement the provider serves, as the mesh names it.
	Resource string
	// Log is where the backend says what an operator needs to know: the loop's domain.Told,
	// which says each fact a backend tells of a consumer (Entry.Once) once while it holds.
	Log Logger
	// MaxConnections is the most connections the backend holds to its server at once, its
	// lease's besides; zero is the backend's default.
	MaxConnections int
	// ReadOnly makes the backend one that only looks (provisioner plan): it changes nothing,
	// and Create, Remove and Drop fail on it.
	ReadOnly bool
}

// Server is an opened Backend as a daemon sees it: what it says to be ready and what /status
// and /metrics show, its lease, and its closing.
type Server interface {
	Backend
	// Server names the server and the provider's role on it, never a password.
	Server() string
	// Ping answers whether the server can be reached, and where not why.
	Ping(ctx context.Context) error
	// Blocked is why the provider cannot finish what it does (something an operator must end,
	// such as a prepared transaction holding what the provider needs), "" where nothing is in
	// its way.
	Blocked() string
	// Kind is how the provider's role stands on the server, as a plain word ("superuser",
	// "delegated"), "" before it was asked.
	Kind() string
	// Leadership is the lease of the backend's resource. Nothing is connected until Held is
	// first called.
	Leadership() Leadership
	// Close closes what the Backend holds open.
	Close()
}

// Leadership is a Lease as a daemon holds it: it shows whether this replica leads, and gives
// the lease up when the daemon ends.
type Leadership interface {
	Lease
	// Leader is whether this replica held the lease when last asked.
	Leader() bool
	// Close gives the lease up.
	Close()
}

// Usage is what one consumer takes of the server.
type Usage struct {
	// DatabaseBytes is the size on disk of its databases.
	DatabaseBytes int64
	// Connections counts its sessions now.
	Connections int
}

// UsageReader is a Server that reads what each consumer takes of it, for /status and
// /metrics.
type UsageReader interface {
	// Usage is what each of the logins that the backend holds takes of the server, in one
	// read; a login it does not hold is left out. It changes nothing.
	Usage(ctx context.Context, logins []string) (map[string]Usage, error)
}
