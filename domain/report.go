package domain

import "time"

// State is where a listed consumer stands after a pass.
type State string

// The states of a listed consumer.
const (
	// StateApplied: created, and held when last checked.
	StateApplied State = "applied"
	// StateWaitingForSecret: its secret could not be read; nothing is applied for it.
	StateWaitingForSecret State = "waiting_for_secret"
	// StateFailing: the last create failed, or its secret was refused; it is tried again next
	// pass.
	StateFailing State = "failing"
	// StateRefused: its entry asks for what the backend will not make (a bad name, a setting
	// off the allowed list, a value the server rejects), or what exists is not the provider's
	// to take (a role renamed away, a database another consumer has): nothing more is made for
	// it until its entry changes, SIGHUP, or its wait ends; LastError says why.
	StateRefused State = "refused"
	// StateBraked: the backend lost it and it was applied again; checks are spaced out.
	StateBraked State = "braked"
	// StateIncomplete: applied, but without something its entry asks for that the backend does
	// not make for it (an extension the server lacks, or refuses): Status.Lacks says what.
	StateIncomplete State = "incomplete"
	// StateUnchecked: the backend as a whole could not be used, so nothing was asked for it.
	StateUnchecked State = "unchecked"
)

// States lists every State, for those who count consumers by state.
var States = []State{StateApplied, StateWaitingForSecret, StateFailing, StateRefused, StateBraked, StateUnchecked, StateIncomplete}

// Status is what the loop knows of one listed consumer.
type Status struct {
	// As is the consumer's login.
	As string `json:"as"`
	// State is where it stands, and Since when it got there.
	State State     `json:"state"`
	Since time.Time `json:"since"`
	// LastError is the last failure said for it (scrubbed), empty once it is applied.
	LastError string `json:"last_error,omitempty"`
	// CheckedAt is when the backend last answered a check of it; zero if never.
	CheckedAt time.Time `json:"checked_at,omitzero"`
	// NextCheck is when it is next due a check; zero where nothing of it is applied yet.
	NextCheck time.Time `json:"next_check,omitzero"`
	// LoginCheckedAt is when the backend last answered a check that logged in as it to check
	// its password (delegated mode); where the backend checks passwords otherwise, when it last
	// answered a check; zero if never.
	LoginCheckedAt time.Time `json:"login_checked_at,omitzero"`
	// InsideCheckedAt is when the backend last answered a check that looked inside what it made
	// for the consumer (its database: the extensions there), on the budget of
	// Config.InsideCheckEvery; zero if never. What is there is taken as it was found then until
	// the next.
	InsideCheckedAt time.Time `json:"inside_checked_at,omitzero"`
	// Drift is what the last check that found it not held said had drifted.
	Drift []string `json:"drift,omitempty"`
	// Updates are the staged changes it is due (an extension's newer version), as its last
	// check said them ("extension vector 0.8.0, wanted 0.8.6"); Kept what the backend keeps
	// for it that its entry no longer names.
	Updates []string `json:"updates,omitempty"`
	Kept    []string `json:"kept,omitempty"`
	// Lacks is what its entry asks for that the backend does not make for it, as its last
	// create or check said it (ports.Holding.Lacks): why it is incomplete.
	Lacks []string `json:"lacks,omitempty"`
}

// LeavingState is where a consumer stands that the backend's record holds and the file no
// longer lists.
type LeavingState string

// The states of a consumer the file no longer lists.
const (
	// LeavingWaiting: still active; withdrawn once the file has stayed unchanged for the
	// settle (WithdrawAt), or held while some entry of the file cannot be read.
	LeavingWaiting LeavingState = "leaving"
	// LeavingHeld: still active; part of a mass withdrawal, held for six times the settle.
	LeavingHeld LeavingState = "held"
	// LeavingWithdrawn: its login taken away, its data kept; with the drop policy, dropped
	// at DropAt.
	LeavingWithdrawn LeavingState = "withdrawn"
	// LeavingArchiving: withdrawn; its drop waits for its archive, under way (LastError says
	// where to, and since when).
	LeavingArchiving LeavingState = "archiving"
	// LeavingFailing: its withdrawal or drop failed (LastError), and is tried again; a drop
	// held by a failed archive says "drop held: archive failed: ...".
	LeavingFailing LeavingState = "failing"
)

// Leaving is what the loop knows of one consumer the backend's record holds that the file no
// longer lists.
type Leaving struct {
	// As is the consumer's login.
	As    string       `json:"as"`
	State LeavingState `json:"state"`
	// Since is when it was withdrawn: its record's time, or when the loop first saw it
	// withdrawn where the record's is later (a wall clock stepped); never after now, and zero
	// while active. WithdrawAt and DropAt are when the loop acts, by the clock it acts on,
	// never before now.
	Since time.Time `json:"since,omitzero"`
	// WithdrawAt is when a waiting withdrawal is due, if the file stays as it is; zero where
	// it waits for something else (an unreadable entry, the lease).
	WithdrawAt time.Time `json:"withdraw_at,omitzero"`
	// DropAt is when its data will be dropped; zero where it never will be (the retain
	// policy).
	DropAt time.Time `json:"drop_at,omitzero"`
	// LastError is the last failure of its withdrawal or drop (scrubbed).
	LastError string `json:"last_error,omitempty"`
}

// Report is what one pass did.
type Report struct {
	// FileRead is whether the contributions file was read and usable; FileProblem why not,
	// as its line says it. While it is not, Consumers and Status are the last listing read, as
	// the last pass that read it left them: what is applied does not go away with the file.
	FileRead    bool
	FileProblem string
	// BadEntries counts entries of the file that could not be decoded. While there are any,
	// the file is not a complete list, and nothing is withdrawn.
	BadEntries int
	// ServerProblem is why the backend as a whole could not be used, empty when it could or
	// was not needed.
	ServerProblem string
	// Standby is set where this replica does not hold the lease, and so did not act.
	Standby bool
	// Consumers is each listed consumer's state after the pass.
	Consumers map[string]State
	// Status is each listed consumer's status after the pass, in the file's order. A Report's
	// statuses are never changed once handed out: the loop changes a copy.
	Status []*Status
	// Created counts creates that succeeded for consumers that were new or changed.
	Created int
	// Reapplied counts creates that succeeded for consumers the backend no longer held.
	Reapplied int
	// Withdrawn counts consumers withdrawn from the backend; Dropped those dropped.
	Withdrawn, Dropped int
	// Failures counts creates, removes and drops that failed.
	Failures int
	// Unchecked counts consumers the backend could not be asked about: the server unusable, a
	// check not made (an earlier one timed out), or a check that failed.
	Unchecked int
	// CheckErrors counts checks that were made and could not be answered (failed, or timed out).
	CheckErrors int
	// WithdrawalsHeld counts consumers the file no longer lists whose withdrawal waits for the
	// file to settle; MassWithdrawal is set when they are more than half of those managed.
	WithdrawalsHeld int
	MassWithdrawal  bool
	// Leaving is every consumer the record holds that the file no longer lists, by login:
	// those whose withdrawal waits or is held, and those withdrawn whose data is kept.
	Leaving []Leaving
	// Rollouts are the staged changes under way across the consumers, by key.
	Rollouts []Rollout
	// Took is how long the pass took, by the loop's clock.
	Took time.Duration
	// Watched are the files the pass read or tried to: the contributions file and every listed
	// consumer's secret. A change to one of them is worth a pass.
	Watched []string
}

// Converged is whether the file was read, every listed consumer was held or created, no
// withdrawal is held and no staged change is under way (the rest of a rollout waits for a later
// pass): what a single pass (--once) did is all it was asked to do.
func (r Report) Converged() bool {
	if !r.FileRead || r.Standby || r.ServerProblem != "" || r.WithdrawalsHeld > 0 || len(r.Rollouts) > 0 {
		return false
	}
	for _, s := range r.Consumers {
		if s != StateApplied && s != StateBraked {
			return false
		}
	}
	return true
}
