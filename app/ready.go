package app

import (
	"context"
	"time"

	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

// observe records a pass: what /status shows, readiness, and the metrics. Ready needs the file
// read (or this replica standing by) and the server usable: as the pass found it, else as a
// ping after it finds it, which also asks again whether anything still blocks the provider.
func (d *daemon) observe(ctx context.Context, r domain.Report) {
	d.last.Store(&r)
	reached := r.ServerProblem == ""
	var pingErr error
	if ctx.Err() == nil && r.ServerProblem == "" {
		pctx, cancel := context.WithTimeout(ctx, min(d.cfg.HoldsTimeout, 5*time.Second))
		pingErr = d.server.Ping(pctx)
		cancel()
		reached = pingErr == nil
	}
	// Readiness first: whoever counts passes on /metrics then finds it as this pass left it.
	switch {
	case r.ServerProblem != "":
		d.setWhy(r.ServerProblem)
	case !r.FileRead && !r.Standby:
		d.setWhy("the contributions file could not be read or used: " + r.FileProblem)
	case pingErr != nil:
		d.setWhy(pingErr.Error())
	case d.server.Blocked() != "": // as the ping found it
		d.setWhy(d.server.Blocked() + "; an operator must end it")
	default:
		d.setWhy("")
	}
	d.metrics.leader.Set(boolean(d.lease.Leader()))
	d.metrics.Mode(d.server.Kind())
	d.metrics.Progress(d.loop.Progress()) // the pass just ended: what its calls counted, before what settled
	d.metrics.Observe(r, reached)
	if a, ok := d.server.(ports.Archiving); ok {
		counts := a.Archived()
		d.metrics.Archived(counts)
		d.archivesDue(ctx, a, counts, r.Standby || r.ServerProblem != "")
	}
	d.usageDue(r)
}

// setWhy records why the daemon is not ready; "" makes it ready.
func (d *daemon) setWhy(why string) { d.why.Store(&why) }

// notReady is why the daemon is not ready, "" where it is.
func (d *daemon) notReady() string { return *d.why.Load() }

// archivesEvery is how often /status's archives are read again from the record, besides after
// each archive this process makes.
const archivesEvery = 10 * time.Minute

// archivesDue reads the archives the record keeps for /status, where this process made one
// since it last read them, or archivesEvery has passed; not while standing by, nor where the
// pass could not use the server (a standby server, one down): nothing is asked of it then.
func (d *daemon) archivesDue(ctx context.Context, a ports.Archiving, counts ports.ArchiveCounts, idle bool) {
	if idle || counts.Made == d.archivesMade && time.Since(d.archivesRead) < archivesEvery {
		return
	}
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	kept, err := a.Archives(c)
	if err != nil {
		return // the record unreadable now: the last listing stands, tried again next pass
	}
	d.archives.Store(&kept)
	d.archivesMade, d.archivesRead = counts.Made, time.Now()
}
