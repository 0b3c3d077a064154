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
	// StateFailing: the last create failed; it is tried again next pass.
	StateFailing State = "failing"
	// StateBraked: the backend lost it and it was applied again; checks are spaced out.
	StateBraked State = "braked"
)

// States lists every State, for those who count consumers by state.
var States = []State{StateApplied, StateWaitingForSecret, StateFailing, StateBraked}

// Report is what one pass did.
type Report struct {
	// FileRead is whether the contributions file was read and usable.
	FileRead bool
	// Consumers is each listed consumer's state after the pass.
	Consumers map[string]State
	// Created counts creates that succeeded for consumers that were new or changed.
	Created int
	// Reapplied counts creates that succeeded for consumers the backend no longer held.
	Reapplied int
	// Withdrawn counts consumers removed from the backend.
	Withdrawn int
	// Failures counts creates and removes that failed.
	Failures int
	// Unchecked counts Holds calls that could not ask the backend.
	Unchecked int
	// Took is how long the pass took, by the loop's clock.
	Took time.Duration
	// Watched are the files the pass read or tried to: the contributions file and every listed
	// consumer's secret. A change to one of them is worth a pass.
	Watched []string
}

// Converged is whether the file was read and every listed consumer was held or created.
func (r Report) Converged() bool {
	if !r.FileRead {
		return false
	}
	for _, s := range r.Consumers {
		if s != StateApplied && s != StateBraked {
			return false
		}
	}
	return true
}
