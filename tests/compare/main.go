// Command compare is `make compare`: the provisioner against the least raw SQL that does the
// same work, on one throwaway PostgreSQL, in one run. Each workload alternates rounds (raw,
// provisioner, raw, provisioner, ...) so that both see the same machine, drops what a round made
// before the next, and prints the median of each and the ratio provisioner/raw, beside the
// parallelism sweep the raw floor's parallelism was chosen from.
//
// The workloads are the issue's: N consumers created from nothing, without and with an
// extension (pg_trgm); N withdrawn with --on-withdraw drop; a start (--once) over consumers
// already made, against one catalog query; and, with the daemon running over consumers that
// each name an extension and a verify pass due, the time from the file changing to the new
// consumer's database existing; and the daemon as a role that is not a superuser (delegated
// mode) over consumers it made, the server's CPU over a window at the default intervals against
// the least a delegated check must ask (verify-delegated). -other-roles grows the server around
// the start over's consumers first.
//
// The server's files are where os.TempDir says: on disk by default, where a drop waits on the
// disk as a real server's does; TMPDIR=/dev/shm runs it in memory, where the time is CPU only
// and the provider's own statements weigh most.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/novox/postgres-provider/app"
	"github.com/novox/postgres-provider/tests/pgserver"
)

// Workloads, by the names -workloads takes.
const (
	wlCreate     = "create"
	wlCreateExt  = "create-ext"
	wlWithdraw   = "withdraw"
	wlStartOver  = "start-over"
	wlFileChange = "file-change"
	wlDelegated  = "verify-delegated"
)

var allWorkloads = []string{wlCreate, wlCreateExt, wlWithdraw, wlStartOver, wlFileChange, wlDelegated}

// extension is what the extension workloads name: in PostgreSQL's contrib, so on every server
// the tests run on, and not trusted-for-free in cost (it creates types, functions, operators).
const extension = "pg_trgm"

type options struct {
	n            int
	rounds       int
	converged    int
	changes      int
	sweep        []int
	sweepRounds  int
	slimTemplate bool
	daemonFlags  []string
	parallel     int // the provisioner's --parallel in the main rounds
	bin          string
	out          string
	workloads    map[string]bool
	statements   bool
	timeout      time.Duration
	window       time.Duration // the delegated verify workload's measured window
	otherRoles   int           // roles that are no consumer's, made before the start-over workload
}

func main() { os.Exit(run()) }

func run() int {
	opts, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "compare: %v\n", err)
		return 2
	}
	// From here on a SIGINT or SIGTERM cancels ctx instead of ending the process, so that every
	// path out goes through the deferred stops below: the daemon's, then the server's.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := compare(ctx, opts); err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "compare: interrupted; server and provisioner stopped")
			return 130
		}
		fmt.Fprintf(os.Stderr, "compare: %v\n", err)
		return 1
	}
	return 0
}

func parseFlags(args []string) (options, error) {
	o := options{}
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.IntVar(&o.n, "n", 200, "consumers created and withdrawn per round")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds of each of raw and provisioner per workload")
	fs.IntVar(&o.converged, "converged", 1000, "consumers of the start-over and file-change workloads")
	fs.IntVar(&o.changes, "changes", 5, "file changes measured in the file-change workload")
	sweep := fs.String("sweep", "1,2,4,8,16", "parallelism tried for the raw floor and the provisioner's --parallel, comma-separated")
	fs.IntVar(&o.sweepRounds, "sweep-rounds", 2, "rounds of each parallelism in the sweep (the raw floor is run at the fastest); "+
		"0: no sweep, the raw floor at the first of -sweep (for runs too long to sweep: 10,000 consumers)")
	fs.IntVar(&o.parallel, "parallel", app.DefaultParallel, "the provisioner's --parallel in the main rounds (default: its own default)")
	fs.StringVar(&o.bin, "bin", "bin/provisioner", "the provisioner binary (built without -race)")
	fs.StringVar(&o.out, "out", "", "also write the results as markdown to this file")
	wl := fs.String("workloads", strings.Join(allWorkloads, ","), "which workloads, comma-separated")
	fs.BoolVar(&o.statements, "statements", false, "log every statement with its duration and every connection, and count them per consumer "+
		"(slows both sides: for where the time goes, not for the ratios)")
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "the longest one run or one wait may take")
	fs.DurationVar(&o.window, "window", 3*time.Minute, "the verify-delegated workload's window, over which the server's CPU is measured "+
		"(at the defaults --verify-every 1m and --login-check-every 1h)")
	fs.BoolVar(&o.slimTemplate, "slim-template", false, "trim template1 before the workloads (its comments, statistics and ICU "+
		"collations deleted, information_schema dropped, its catalogs rewritten): every database made from it takes 4.6 MB "+
		"where it took 7.5 (PostgreSQL 15), so that 10,000 fit a smaller disk; both sides make theirs from it")
	daemonFlags := fs.String("daemon-flags", "", "more flags for the verify-delegated workload's daemon, space-separated "+
		"(e.g. '--usage-every 0' to see what the usage read costs apart)")
	fs.IntVar(&o.otherRoles, "other-roles", 0, "roles that are no consumer's (in groups, a member each) made before the start-over "+
		"workload, and dropped after it: a server grown around the consumers")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.daemonFlags = strings.Fields(*daemonFlags)
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, s := range strings.Split(*sweep, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || p < 1 {
			return o, fmt.Errorf("-sweep %q: want positive integers, comma-separated", *sweep)
		}
		o.sweep = append(o.sweep, p)
	}
	o.workloads = map[string]bool{}
	for _, w := range strings.Split(*wl, ",") {
		w = strings.TrimSpace(w)
		known := false
		for _, k := range allWorkloads {
			known = known || k == w
		}
		if !known {
			return o, fmt.Errorf("-workloads: unknown %q; want some of %s", w, strings.Join(allWorkloads, ","))
		}
		o.workloads[w] = true
	}
	switch {
	case o.n < 1 || o.rounds < 1 || o.converged < 1 || o.changes < 1:
		return o, errors.New("-n, -rounds, -converged and -changes want at least 1")
	case o.sweepRounds < 0:
		return o, errors.New("-sweep-rounds wants 0 or more")
	case o.parallel < 1:
		return o, errors.New("-parallel wants at least 1")
	case o.timeout <= 0:
		return o, errors.New("-timeout wants a positive duration")
	case o.window < time.Minute:
		return o, errors.New("-window wants a minute at least: one verify interval")
	case o.otherRoles < 0:
		return o, errors.New("-other-roles wants 0 or more")
	}
	return o, nil
}

// bench is one run's shared state: the server, the binary, where the mesh's files go.
type bench struct {
	opts    options
	srv     *pgserver.Server
	cfg     *pgx.ConnConfig // the superuser's, for the raw side
	provURL string          // the provisioner's, with an application_name to find its sessions by
	root    string          // the mesh's files
	serial  int             // makes every round's consumer names new
	results []result
	sweeps  []sweepResult
	counts  []statementCount
}

func compare(ctx context.Context, opts options) error {
	if _, err := os.Stat(opts.bin); err != nil {
		return fmt.Errorf("the provisioner binary: %w (make build)", err)
	}
	var settings map[string]string
	if opts.statements {
		settings = statementSettings
	}
	fmt.Println("compare: starting a throwaway PostgreSQL ...")
	srv, err := pgserver.Start(pgserver.Options{Settings: settings})
	if err != nil {
		return fmt.Errorf("start PostgreSQL: %w", err)
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "compare: stop PostgreSQL: %v\n", err)
		}
	}()
	root, err := os.MkdirTemp("", "provisioner-compare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	cfg, err := pgx.ParseConfig(srv.URL)
	if err != nil {
		return err
	}
	b := &bench{opts: opts, srv: srv, cfg: cfg, provURL: srv.URL + "&application_name=" + provApp, root: root}
	if ctx.Err() != nil { // a signal while the server started
		return ctx.Err()
	}
	header, err := b.header(ctx)
	if err != nil {
		return err
	}
	fmt.Println(header)
	if opts.slimTemplate {
		if err := b.slim(ctx); err != nil {
			return fmt.Errorf("-slim-template: %w", err)
		}
	}
	if err := b.warmUp(ctx); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}

	for _, w := range []struct {
		name string
		run  func(context.Context) error
	}{
		{wlCreate, func(ctx context.Context) error { return b.createWorkload(ctx, "") }},
		{wlCreateExt, func(ctx context.Context) error { return b.createWorkload(ctx, extension) }},
		{wlWithdraw, b.withdrawWorkload},
		{wlStartOver, b.startOverWorkload},
		{wlFileChange, b.fileChangeWorkload},
		{wlDelegated, b.delegatedWorkload},
	} {
		if !opts.workloads[w.name] {
			continue
		}
		fmt.Printf("\n== %s\n", w.name)
		if err := w.run(ctx); err != nil {
			return fmt.Errorf("%s: %w", w.name, err)
		}
	}
	report := header + "\n\n" + b.report()
	fmt.Println()
	fmt.Println(report)
	if opts.out != "" {
		if err := os.WriteFile(opts.out, []byte(report), 0o644); err != nil {
			return fmt.Errorf("write -out: %w", err)
		}
		fmt.Printf("compare: results written to %s\n", opts.out)
	}
	return nil
}

// header says what ran where: the figures mean little without the machine and the settings.
func (b *bench) header(ctx context.Context) (string, error) {
	conn, err := b.connect(ctx, "")
	if err != nil {
		return "", err
	}
	defer closeConn(conn)
	var version string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		return "", fmt.Errorf("server version: %w", err)
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fields := strings.Fields(string(load))
	if len(fields) > 3 {
		fields = fields[:3]
	}
	s := fmt.Sprintf("# make compare\n\nN=%d, rounds=%d (interleaved raw, provisioner, ...), PostgreSQL %s on 127.0.0.1 (fsync off), "+
		"%d CPUs, load average %s at start; the provisioner with --parallel %d (its default is %d).",
		b.opts.n, b.opts.rounds, version, runtime.NumCPU(), strings.Join(fields, " "), b.opts.parallel, app.DefaultParallel)
	if b.opts.statements {
		s += "\n\n-statements: every statement logged with its duration, and every connection; the times are slowed by it."
	}
	return s, nil
}

// slim trims template1, which both sides' databases are copies of, to what a database needs:
// a copy of it is 4.6 MB where it was 7.5 MB (PostgreSQL 15). Its comments, column statistics,
// ICU collations and information_schema go (nothing either side runs reads them), and its
// catalogs are rewritten without their free space maps.
func (b *bench) slim(ctx context.Context) error {
	conn, err := b.connect(ctx, "template1")
	if err != nil {
		return err
	}
	defer closeConn(conn) // before any CREATE DATABASE: a template in use cannot be copied
	for _, s := range []string{"DELETE FROM pg_catalog.pg_description", "DELETE FROM pg_catalog.pg_statistic",
		"DELETE FROM pg_catalog.pg_collation WHERE collprovider = 'i'", "DROP SCHEMA information_schema CASCADE", "VACUUM FULL"} {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	var size string
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.pg_size_pretty(pg_catalog.pg_database_size('template1'))").Scan(&size); err != nil {
		return err
	}
	fmt.Printf("compare: template1 trimmed to %s: each database made from it takes as much\n", size)
	return nil
}

// warmUp creates and drops a few consumers each way, not timed: a new server's first creates
// are slower (its caches, and the machine's memory the page cache first touches), and would
// otherwise all fall to whichever side runs first.
func (b *bench) warmUp(ctx context.Context) error {
	n := min(b.opts.n, 50)
	m, err := b.newMesh("cmp-warm-up")
	if err != nil {
		return err
	}
	start := time.Now()
	raw, err := b.consumers("u", n)
	if err != nil {
		return err
	}
	if err := b.rawCreate(ctx, raw, extension, 2); err != nil {
		return err
	}
	if err := b.cleanup(ctx, names(raw)); err != nil {
		return err
	}
	prov, err := b.consumers("u", n)
	if err != nil {
		return err
	}
	if err := m.give(prov, extension); err != nil {
		return err
	}
	if _, err := b.once(ctx, m, b.opts.parallel); err != nil {
		return err
	}
	if err := b.cleanup(ctx, names(prov)); err != nil {
		return err
	}
	fmt.Printf("compare: warmed up in %s (%d consumers with %s made and dropped each way, not timed)\n", dur(time.Since(start)), n, extension)
	return nil
}
