package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/novox/postgres-provider/adapters/files"
	"github.com/novox/postgres-provider/adapters/logger"
	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

// Exit codes of `provisioner plan`.
const (
	planNothing = 0 // every consumer is as the file asks
	planFailed  = 1 // could not plan: the file unusable, the server unreachable or unreadable
	planUsage   = 2 // bad usage or configuration
	planPending = 3 // something is to be done, waits, or is refused
)

// planCommand is `provisioner plan [--format text|json] FLAGS`: what a pass would do now, per
// consumer, and why, changing nothing. It takes the daemon's flags and variables, read by the
// daemon's parse; it takes no lease, serves nothing and starts no loop, so it may run beside a
// daemon.
func planCommand(ctx context.Context, args []string, env map[string]string, stdout, stderr io.Writer) int {
	format, rest, err := formatOf(args)
	if err != nil {
		fmt.Fprintf(stderr, "provisioner plan: %v (see provisioner plan --help)\n", err)
		return planUsage
	}
	cfg, err := parse(rest, env)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "provisioner plan: %s (see provisioner plan --help)\n", redact(err.Error(), cfg.Backend))
		return planUsage
	case cfg.Help:
		fmt.Fprint(stdout, planHelp(cfg.Backend))
		return planNothing
	}
	log, err := logOf(stderr, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "provisioner plan: %v\n", err)
		return planUsage
	}
	backend, err := backendOf(cfg, log, true)
	if err != nil {
		fmt.Fprintf(stderr, "provisioner plan: %s\n", redact(err.Error(), cfg.Backend))
		return planUsage
	}
	defer backend.Close()
	// Once: a mass withdrawal's settle counts from the file's last change, as for a daemon
	// that has run since then; the lines say nothing of trying again.
	loop := loopConfig(cfg)
	loop.Once = true
	p, err := domain.New(loop, files.New(), clock.New(), backend, nil, log).Preview(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "provisioner plan: could not plan: %s\n", logger.Escape(redact(err.Error(), cfg.Backend)))
		return planFailed
	}
	if cfg.Listen != "" {
		fromDaemon(ctx, &p, cfg.Listen, time.Now())
	}
	if format == "json" {
		doc := struct {
			domain.Preview
			Pending bool `json:"pending"`
		}{p, p.Pending()}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			fmt.Fprintf(stderr, "provisioner plan: %v\n", err)
			return planFailed
		}
	} else {
		writePlan(stdout, p, time.Now())
	}
	if p.Pending() {
		return planPending
	}
	return planNothing
}

// fromDaemon times p's drops as the daemon serving at listen will make them, where it acts and
// answers within a second: a drop waits --drop-after from when that daemon first saw the
// withdrawal, which only it knows (a plan alone can say only the earliest, from the record's
// time). Its /status gives when, by the clock it acts on.
func fromDaemon(ctx context.Context, p *domain.Preview, listen string, now time.Time) {
	doc, err := fetchStatus(ctx, listen, time.Second)
	if err != nil || doc.Role != "acting" {
		return
	}
	due, held := map[string]time.Time{}, map[string]string{}
	for _, l := range doc.Leaving {
		if !l.DropAt.IsZero() {
			due[l.As] = l.DropAt
		}
		if strings.HasPrefix(l.LastError, "drop held: ") { // its archive under way, or failed
			held[l.As] = l.LastError
		}
	}
	for i := range p.Consumers {
		c := &p.Consumers[i]
		if why, ok := held[c.As]; ok && c.Act == domain.PlanDrop {
			c.Why = append(c.Why, why+" (the provisioner at "+listen+")")
		}
		at, ok := due[c.As]
		if c.Act != domain.PlanDrop || !c.Earliest || !ok {
			continue
		}
		c.At, c.Earliest = time.Time{}, false
		if at.After(now) {
			c.At = at
		}
		c.Why = append(c.Why, "when the provisioner at "+listen+" drops it (its /status)")
	}
}

// formatOf takes --format (text or json), the one flag of plan's own, out of args, and answers
// the rest for the daemon's parse.
func formatOf(args []string) (format string, rest []string, err error) {
	format = "text"
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "format" {
			rest = append(rest, a)
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return "", nil, fmt.Errorf("flag needs an argument: --format")
			}
			i++
			value = args[i]
		}
		if value != "text" && value != "json" {
			return "", nil, fmt.Errorf("--format %q: want text or json", value)
		}
		format = value
	}
	return format, rest, nil
}

// writePlan prints p as an operator reads it: a line per consumer, then how many of each act.
// Every field is escaped (logger.Escape): logins, paths and reasons come from outside.
func writePlan(w io.Writer, p domain.Preview, now time.Time) {
	e := logger.Escape
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONSUMER\tACT\tWHEN\tWHY")
	counts := map[string]int{}
	for _, c := range p.Consumers {
		act, when := c.Act, "-"
		if act == "" {
			act = "-"
		} else if act != domain.PlanWait && act != string(ports.ActRefuse) && act != domain.PlanIncomplete {
			when = "next pass"
		}
		if !c.At.IsZero() {
			when = c.At.UTC().Format(time.RFC3339)
			if d := c.At.Sub(now); d > 0 {
				when += " (in " + d.Round(time.Second).String() + ")"
			}
		}
		if c.Earliest {
			when += " at the earliest"
		}
		if c.Held {
			when += ", held: mass withdrawal"
		}
		why := strings.Join(c.Why, "; ")
		if why == "" {
			why = "-"
		}
		counts[c.Act]++
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e(c.As), e(act), e(when), e(why))
	}
	tw.Flush()
	var summary []string
	for _, act := range []ports.Act{ports.ActCreate, ports.ActAdopt, ports.ActRepair, ports.ActUpdate, ports.ActRefuse, ports.ActWithdraw, ports.ActDrop, ports.ActWait} {
		if counts[string(act)] > 0 {
			summary = append(summary, fmt.Sprintf("%d %s", counts[string(act)], act))
		}
	}
	if counts[domain.PlanIncomplete] > 0 {
		summary = append(summary, fmt.Sprintf("%d %s", counts[domain.PlanIncomplete], domain.PlanIncomplete))
	}
	if counts[""] > 0 {
		summary = append(summary, fmt.Sprintf("%d as asked", counts[""]))
	}
	if len(summary) == 0 {
		summary = append(summary, "no consumers")
	}
	fmt.Fprintf(w, "\nplan: %s", strings.Join(summary, ", "))
	if p.BadEntries > 0 {
		fmt.Fprintf(w, "; %d entry(ies) of the file cannot be read, so nothing is withdrawn", p.BadEntries)
	}
	if p.MassWithdrawal {
		fmt.Fprint(w, "; the withdrawals are held as a mass withdrawal")
	}
	fmt.Fprintln(w)
}

const planUsageText = `Usage: provisioner plan [--format text|json] --receives PATH [flags]

Prints what a pass of the provisioner would do now, per consumer and why, and changes nothing:
the consumers the file lists, in its order, then the others the server's record holds. It reads
the contributions file, the secrets, the record and the server as a pass does, in read-only
transactions; it takes no lease, serves nothing and can run beside a running daemon.

%s  repair    the provider's, and not as asked (WHY: what drifted)
  update    as asked but for staged changes it is due, made as their rollout allows (WHY: each
            change, e.g. an extension's newer version)
  refuse    exists and is not the provider's to take, or asks for what cannot be made (WHY)
  withdraw  no longer listed: its login goes (WHEN: after the file settles, or held as a
            mass withdrawal)
  drop      withdrawn, and dropped with its data at WHEN (--on-withdraw drop, --drop-after)
  wait      listed, and its secret cannot be read or used yet
  incomplete
            made, but without what its entry asks for that is not made here (WHY: what it
            lacks, e.g. an extension the server does not have): install it on the server, or
            allow it, and the next check makes it
  -         as the file asks: nothing to do

  --format text|json
        text (default): a table for people; json: {"consumers": [{"as", "act", "why", "at",
        "held"}], "bad_entries", "mass_withdrawal", "pending"}

Every other flag and variable is the daemon's (provisioner --help), read the same way; those
that only a daemon uses (--once, --every) change nothing here. A withdrawal is timed as for a
daemon that has run since the file last changed. A drop waits --drop-after from when the acting
daemon first saw the withdrawal: where a daemon acting for the resource answers at --listen,
its /status times the drop; otherwise WHEN is the earliest, from the record's time.

Exit codes: 0 every consumer is as the file asks; 3 something is to be done, waits, is
refused or is incomplete; 1 could not plan (the file unusable, the server unreachable or its record unreadable);
2 bad usage or configuration.
`

// planHelp is plan's --help, its legend in kind's words where it has them (ports.Described).
func planHelp(kind ports.Kind) string {
	acts := map[ports.Act]string{
		ports.ActCreate: "nothing of the consumer exists: it is made",
		ports.ActAdopt:  "it exists, no record names it, and the backend takes it over\n(WHY: what that changes)",
	}
	if d, ok := kind.(ports.Described); ok {
		for act, words := range d.Acts() {
			acts[act] = words
		}
	}
	var legend strings.Builder
	for _, act := range []ports.Act{ports.ActCreate, ports.ActAdopt} {
		fmt.Fprintf(&legend, "  %-9s %s\n", act, strings.ReplaceAll(acts[act], "\n", "\n"+strings.Repeat(" ", 12)))
	}
	return fmt.Sprintf(planUsageText, legend.String())
}
