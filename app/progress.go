package app

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

// progressAfter is how long a pass runs before /status and `provisioner status` say where it
// stands: a pass that ends sooner is not worth the words.
const progressAfter = 3 * time.Second

// progressDoc is where a long pass stands, in /status.
type progressDoc struct {
	// Text says it as the line does: "creating: 747 of 1,000, about 40 s left".
	Text           string  `json:"text"`
	Doing          string  `json:"doing"`
	Done           int     `json:"done"`
	Of             int     `json:"of"`
	RunningSeconds float64 `json:"running_seconds"`
	// LeftSeconds is about how long what it is doing has left, once a call has returned.
	LeftSeconds *float64 `json:"left_seconds,omitempty"`
}

// progressOf is p as /status shows it at now; nil where no pass has run for progressAfter.
func progressOf(p domain.Progress, now time.Time) *progressDoc {
	if !p.Running || now.Sub(p.Started) < progressAfter {
		return nil
	}
	doc := &progressDoc{Text: progressText(p, now), Doing: p.Doing, Done: p.Done, Of: p.Of, RunningSeconds: now.Sub(p.Started).Round(time.Second).Seconds()}
	if left, ok := p.Left(now); ok {
		s := left.Round(time.Second).Seconds()
		doc.LeftSeconds = &s
	}
	return doc
}

// progressText says where p stands at now: "creating: 747 of 1,000, about 40 s left".
func progressText(p domain.Progress, now time.Time) string {
	text := p.Doing
	if p.Of > 0 {
		text += ": " + thousands(p.Done) + " of " + thousands(p.Of)
	}
	if left, ok := p.Left(now); ok {
		text += ", about " + roughly(left) + " left"
	}
	return text
}

// roughly is d as a person says a wait: seconds under two minutes, then minutes.
func roughly(d time.Duration) string {
	if d < 2*time.Minute {
		return strconv.Itoa(int(d.Round(time.Second).Seconds())) + " s"
	}
	return strconv.Itoa(int(d.Round(time.Minute).Minutes())) + " min"
}

// thousands is n with a comma every three digits: 1,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// watchPasses moves the counters as the pass's calls return, and says where a long pass stands
// every --progress-every, until ctx ends.
func (d *daemon) watchPasses(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var said time.Time // when the pass under way was last said, zero before it was
	var saidPass int64
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			p := d.loop.Progress()
			d.metrics.Progress(p)
			if !p.Running {
				continue
			}
			if p.Pass != saidPass {
				saidPass, said = p.Pass, p.Started
			}
			if now.Sub(said) >= d.cfg.ProgressEvery {
				said = now
				d.log.Log(ports.Entry{Level: slog.LevelInfo, Message: fmt.Sprintf("pass under way for %s: %s",
					now.Sub(p.Started).Round(time.Second), progressText(p, now))})
			}
		}
	}
}
