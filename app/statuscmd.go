package app

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/novox/postgres-provider/adapters/logger"
	"github.com/novox/postgres-provider/domain"
)

// statusCommand is `provisioner status [--listen ADDR]`: each consumer's status, and those
// leaving, from the /status of the provisioner listening at ADDR (else PROVISIONER_LISTEN), as
// tables. Its exit code is statusUsage's: 0 ready, 1 not ready or no answer, 2 bad usage.
func statusCommand(ctx context.Context, args []string, env map[string]string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("provisioner status", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	listen := fs.String("listen", env[envName("listen")], "the address the provisioner serves /status on")
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, statusUsage)
		return 0
	}
	if err != nil || fs.NArg() > 0 || *listen == "" {
		fmt.Fprintln(stderr, "provisioner status: usage: provisioner status --listen ADDR (or PROVISIONER_LISTEN)")
		return 2
	}
	doc, err := fetchStatus(ctx, *listen, 10*time.Second)
	if err != nil {
		fmt.Fprintf(stderr, "provisioner status: %v\n", err)
		if errors.As(err, new(badAddress)) {
			return 2
		}
		return 1
	}
	writeStatus(stdout, doc, time.Now())
	if !doc.Ready {
		return 1 // the table says why, in its first line
	}
	return 0
}

// badAddress is fetchStatus's error where listen is no address to ask: bad usage.
type badAddress struct{ error }

// fetchStatus is the /status of the provisioner listening at listen, asked within wait.
func fetchStatus(ctx context.Context, listen string, wait time.Duration) (statusDoc, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var doc statusDoc
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+listen+"/status", nil)
	if err != nil {
		return doc, badAddress{err}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return doc, fmt.Errorf("no provisioner answers at %s: %w", listen, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return doc, fmt.Errorf("%s/status: %w", listen, err)
	}
	return doc, nil
}

const statusUsage = `Usage: provisioner status [--listen ADDR]

Prints, from the /status of the provisioner serving at ADDR, whether it is ready, each
consumer the contributions file lists (state, since, last and next check, drift or last
error), and, under LEAVING, each one the file no longer lists that the server still holds:
waiting for the file to settle (leaving), held as part of a mass withdrawal (held), withdrawn
with its data kept (withdrawn, and when its data is dropped under --on-withdraw drop), or
whose withdrawal fails (failing).

  --listen ADDR  [PROVISIONER_LISTEN]
        the address the provisioner was started with (its --listen), e.g. 127.0.0.1:9847

Exit codes: 0 printed, and the provisioner is ready; 1 printed, and it is not ready (its
/readyz says 503: the first line says why), or no provisioner answers there; 2 bad usage.
`

// writeStatus prints doc as an operator reads it: the provider, then a line per listed
// consumer, then, where there are any, a line per consumer leaving. Every field is escaped
// (logger.Escape): logins, paths and error texts come from outside, and a newline, a tab or an
// escape sequence in one must neither add a row nor steer the terminal.
func writeStatus(w io.Writer, doc statusDoc, now time.Time) {
	ready := "ready"
	if !doc.Ready {
		ready = "not ready: " + doc.NotReady
	}
	e := logger.Escape
	fmt.Fprintf(w, "provisioner %s for %s, %s, %s\n", e(doc.Version), e(doc.Resource), e(doc.Role), e(ready))
	if doc.ServerProblem != "" {
		fmt.Fprintf(w, "server: %s\n", e(doc.ServerProblem))
	}
	if doc.FileProblem != "" {
		fmt.Fprintf(w, "file: %s; the consumers below are those of the last listing read\n", e(doc.FileProblem))
	}
	if p := doc.Pass; p != nil {
		fmt.Fprintf(w, "pass under way for %s: %s\n", time.Duration(p.RunningSeconds*float64(time.Second)), e(p.Text))
	}
	if p := doc.LastPass; p != nil && p.MassWithdrawal {
		fmt.Fprintf(w, "withdrawal held: the file no longer lists %d consumers, more than half of those managed; "+
			"they are withdrawn once it has stayed unchanged, so put it right now if that is not meant\n", p.WithdrawalsHeld)
	}
	ago := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		if d := now.Sub(t); d >= 0 {
			return d.Round(time.Second).String() + " ago"
		}
		return "in " + t.Sub(now).Round(time.Second).String()
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// SIZE and CONNS once usage was read (--usage-every): before, the table is as it was.
	usage := func(string) string { return "" }
	header := "CONSUMER\tSTATE\tSINCE\tCHECKED\tNEXT CHECK\t"
	if doc.Usage != nil {
		header += "SIZE\tCONNS\t"
		usage = func(as string) string {
			u, ok := doc.Usage[as]
			if !ok {
				return "-\t-\t"
			}
			return bytesText(u.DatabaseBytes) + "\t" + strconv.Itoa(u.Connections) + "\t"
		}
	}
	fmt.Fprintln(tw, header+"DRIFT / LAST ERROR")
	for _, c := range doc.Consumers {
		note := strings.Join(slices.Concat(lacking(c.Lacks), c.Drift, c.Updates, c.Kept), ", ")
		if c.LastError != "" {
			note = strings.TrimSpace(note + " " + c.LastError)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s%s\n", e(c.As), e(string(c.State)), ago(c.Since), ago(c.CheckedAt), ago(c.NextCheck),
			usage(c.As), e(orDash(note)))
	}
	tw.Flush()
	writeRollouts(w, doc.Rollouts, ago)
	defer writeArchives(w, doc.Archives, ago)
	if len(doc.Leaving) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LEAVING\tSTATE\tSINCE\tWITHDRAW AT\tDROP DUE\tLAST ERROR")
	for _, l := range doc.Leaving {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e(l.As), e(string(l.State)), ago(l.Since), ago(l.WithdrawAt), ago(l.DropAt), e(orDash(l.LastError)))
	}
	tw.Flush()
}

// bytesText is n bytes as a person reads a size: 7.6 MB, 1.2 GB (powers of 1,000).
func bytesText(n int64) string {
	const units = "kMGTPE"
	if n < 1000 {
		return strconv.FormatInt(n, 10) + " B"
	}
	f, i := float64(n)/1000, 0
	for f >= 1000 && i < len(units)-1 {
		f, i = f/1000, i+1
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + " " + units[i:i+1] + "B"
}

// orDash is s, or "-" for an empty cell.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeRollouts prints, where there are any, a line per extension update under way: the
// extension, from and to, done of total, and whether it waits for its canaries' soak or is
// halted and why. Escaped as every field.
func writeRollouts(w io.Writer, rollouts []domain.Rollout, ago func(time.Time) string) {
	if len(rollouts) == 0 {
		return
	}
	e := logger.Escape
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLLOUT	FROM	TO	DONE	STATE")
	for _, r := range rollouts {
		state := "under way"
		switch {
		case r.Halted != "":
			state = "halted: " + r.Halted
		case !r.FollowAt.IsZero():
			state = "canaries (" + strings.Join(r.Canaries, ", ") + ") soaking; the rest follow " + ago(r.FollowAt)
		case len(r.Canaries) > 0 && r.Done < len(r.Canaries):
			state = "canaries first: " + strings.Join(r.Canaries, ", ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d of %d\t%s\n", e(r.Subject), e(orDash(r.From)), e(r.To), r.Done, r.Total, e(state))
	}
	tw.Flush()
}

// writeArchives prints, where there are any, a line per archive a dropped consumer left:
// whose, of what, its size, when it was made and where it is. Escaped as every field.
func writeArchives(w io.Writer, archives []archiveDoc, ago func(time.Time) string) {
	if len(archives) == 0 {
		return
	}
	e := logger.Escape
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ARCHIVE OF	DATABASE	SIZE	MADE	WHERE")
	for _, a := range archives {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e(a.As), e(a.Database), bytesText(a.Bytes), ago(a.Made), e(a.Place))
	}
	tw.Flush()
}

// lacking is what a consumer lacks, each said as lacked.
func lacking(lacks []string) []string {
	out := make([]string, len(lacks))
	for i, l := range lacks {
		out[i] = "lacks " + l
	}
	return out
}
