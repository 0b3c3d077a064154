package app

import (
	"time"

	"github.com/novox/postgres-provider/domain"
)

// statusDoc is what GET /status answers, and what `provisioner status` reads. Times are RFC
// 3339; durations are numbers of seconds, named with their unit, as Prometheus has them.
type statusDoc struct {
	Resource string `json:"resource"`
	Version  string `json:"version"`
	// Role is "acting" or "standby" (another replica holds the lease).
	Role string `json:"role"`
	Mode string `json:"mode,omitempty"`
	// Ready is /readyz's answer; NotReady why not.
	Ready    bool   `json:"ready"`
	NotReady string `json:"not_ready,omitempty"`
	// LastPass is the last pass, nil before the first.
	LastPass      *passDoc `json:"last_pass,omitempty"`
	ServerProblem string   `json:"server_problem,omitempty"`
	// FileProblem is why the contributions file could not be used by the last pass; the
	// consumers are then those of the last listing read.
	FileProblem string `json:"file_problem,omitempty"`
	// Pass is where the pass under way stands, once it has run for a few seconds (progress.go).
	Pass *progressDoc `json:"pass,omitempty"`
	// Consumers is every consumer the file lists, in its order; during the first pass, as far
	// as each has got (its create returned, else unchecked).
	Consumers []*domain.Status `json:"consumers"`
	// Usage is each listed consumer's usage as last read (--usage-every), by login; a consumer
	// not read yet (or without a role) has none.
	Usage map[string]usageDoc `json:"usage,omitempty"`
	// Leaving is every consumer the record holds that the file no longer lists: waiting for
	// the file to settle, held as part of a mass withdrawal, or withdrawn with its data kept
	// (and, with --on-withdraw drop, when it is dropped).
	Leaving []domain.Leaving `json:"leaving"`
	// Rollouts is each extension update under way across the consumers: the extension, from
	// and to, done of total, its canaries and when the rest follow, and why it is halted.
	Rollouts []domain.Rollout `json:"rollouts"`
	// Archives are the archives dropped consumers left (--archive-to, --archive-command), newest
	// first, as the record kept them when last read.
	Archives []archiveDoc `json:"archives,omitempty"`
}

// archiveDoc is one archive in /status.
type archiveDoc struct {
	As       string    `json:"as"`
	Database string    `json:"database"`
	Name     string    `json:"name"`
	Place    string    `json:"place"`
	Bytes    int64     `json:"bytes"`
	SHA256   string    `json:"sha256"`
	Made     time.Time `json:"made"`
}

// passDoc is the last pass in /status.
type passDoc struct {
	TookSeconds float64 `json:"took_seconds"`
	FileRead    bool    `json:"file_read"`
	BadEntries  int     `json:"bad_entries,omitempty"`
	// WithdrawalsHeld counts the consumers whose withdrawal waits for the file to settle;
	// MassWithdrawal is whether they are held as a mass withdrawal (more than half of those
	// managed).
	WithdrawalsHeld int  `json:"withdrawals_held"`
	MassWithdrawal  bool `json:"mass_withdrawal"`
}

// status is the status document as the last pass and readiness leave it.
func (d *daemon) status() statusDoc {
	why := d.notReady()
	doc := statusDoc{Resource: d.cfg.Resource, Version: version().version, Role: "acting", Mode: d.server.Kind(),
		Ready: why == "", NotReady: why, Consumers: []*domain.Status{}, Leaving: []domain.Leaving{},
		Rollouts: []domain.Rollout{}}
	doc.Pass = progressOf(d.loop.Progress(), time.Now())
	if r := d.last.Load(); r != nil {
		doc.LastPass = &passDoc{TookSeconds: r.Took.Seconds(), FileRead: r.FileRead, BadEntries: r.BadEntries,
			WithdrawalsHeld: r.WithdrawalsHeld, MassWithdrawal: r.MassWithdrawal}
		doc.ServerProblem, doc.FileProblem = r.ServerProblem, r.FileProblem
		if r.Standby {
			doc.Role = "standby"
		}
		if r.Status != nil {
			doc.Consumers = r.Status
			doc.Usage = d.usageOf(r.Status)
		}
		if r.Leaving != nil {
			doc.Leaving = r.Leaving
		}
		if r.Rollouts != nil {
			doc.Rollouts = r.Rollouts
		}
	}
	if kept := d.archives.Load(); kept != nil {
		for _, a := range *kept {
			doc.Archives = append(doc.Archives, archiveDoc{As: a.As, Database: a.Database, Name: a.Name, Place: a.Place, Bytes: a.Size,
				SHA256: a.SHA256, Made: a.Made})
		}
	}
	if len(doc.Consumers) == 0 {
		if listed := d.loop.Settling(); listed != nil { // the first pass under way: as far as each has got
			doc.Consumers = make([]*domain.Status, len(listed))
			for i := range listed {
				doc.Consumers[i] = &listed[i]
			}
		}
	}
	return doc
}
