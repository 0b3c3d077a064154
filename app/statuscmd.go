package app

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/novox/postgres-provider/adapters/logger"
)

// statusCommand is `provisioner status [--listen ADDR]`: each consumer's status, from the
// /status of the provisioner listening at ADDR (else PROVISIONER_LISTEN), as a table.
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
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, "http://"+*listen+"/status", nil)
	if err != nil {
		fmt.Fprintf(stderr, "provisioner status: %v\n", err)
		return 2
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "provisioner status: no provisioner answers at %s: %v\n", *listen, err)
		return 1
	}
	defer resp.Body.Close()
	var doc statusDoc
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		fmt.Fprintf(stderr, "provisioner status: %s/status: %v\n", *listen, err)
		return 1
	}
	writeStatus(stdout, doc, time.Now())
	return 0
}

const statusUsage = `Usage: provisioner status [--listen ADDR]

Prints each consumer's status, as a table, from the /status of the provisioner serving at ADDR.

  --listen ADDR  [PROVISIONER_LISTEN]
        the address the provisioner was started with (its --listen), e.g. 127.0.0.1:9847

Exit codes: 0 printed; 1 no provisioner answers there; 2 bad usage.
`

// writeStatus prints doc as an operator reads it: the provider, then a line per consumer. Every
// field is escaped (logger.Escape): logins, paths and error texts come from outside, and a
// newline, a tab or an escape sequence in one must neither add a row nor steer the terminal.
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
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONSUMER\tSTATE\tSINCE\tCHECKED\tNEXT CHECK\tDRIFT / LAST ERROR")
	ago := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		if d := now.Sub(t); d >= 0 {
			return d.Round(time.Second).String() + " ago"
		}
		return "in " + t.Sub(now).Round(time.Second).String()
	}
	for _, c := range doc.Consumers {
		note := strings.Join(c.Drift, ", ")
		if c.LastError != "" {
			note = strings.TrimSpace(note + " " + c.LastError)
		}
		if note == "" {
			note = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e(c.As), e(string(c.State)), ago(c.Since), ago(c.CheckedAt), ago(c.NextCheck), e(note))
	}
	tw.Flush()
}
