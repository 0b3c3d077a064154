package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/novox/postgres-provider/tests/poll"
)

// result is one workload's figures: the raw floor's rounds at parallelism rawP, the
// provisioner's at provP, and the target they are held to.
type result struct {
	workload  string
	n         int
	raw, prov []measure
	rawP      int
	provP     int
	maxRatio  float64       // the target as a ratio of the raw floor; 0: none
	maxWall   time.Duration // the target as a time (file change); 0: none
	target    string
	note      string
}

// sweepResult is one workload's parallelism sweep: each P, both sides.
type sweepResult struct {
	workload  string
	raw, prov map[int][]measure
}

// round is one timed run of one side at parallelism p; main is whether it is one of the main
// rounds (not the sweep), and first whether it is the first of them.
type round func(p int, first bool) (measure, error)

// pairs runs a workload's sweep, each parallelism for both sides in turn, and then its main
// rounds, raw at the parallelism the sweep found fastest and the provisioner at -parallel,
// alternating: raw, provisioner, raw, provisioner, ...
func (b *bench) pairs(wl string, raw, prov round) (rawP int, raws, provs []measure, err error) {
	sw := sweepResult{workload: wl, raw: map[int][]measure{}, prov: map[int][]measure{}}
	for r := range b.opts.sweepRounds {
		for _, p := range b.opts.sweep {
			mr, err := raw(p, false)
			if err != nil {
				return 0, nil, nil, fmt.Errorf("sweep, raw P=%d: %w", p, err)
			}
			mp, err := prov(p, false)
			if err != nil {
				return 0, nil, nil, fmt.Errorf("sweep, provisioner --parallel %d: %w", p, err)
			}
			sw.raw[p], sw.prov[p] = append(sw.raw[p], mr), append(sw.prov[p], mp)
			fmt.Printf("  sweep %d/%d P=%-2d  raw %-9s provisioner %s\n", r+1, b.opts.sweepRounds, p, dur(mr.wall), dur(mp.wall))
		}
	}
	rawP = b.opts.sweep[0]
	if b.opts.sweepRounds == 0 {
		fmt.Printf("  the raw floor's parallelism: P=%d (no sweep: the first of -sweep)\n", rawP)
	} else {
		b.sweeps = append(b.sweeps, sw)
		for _, p := range b.opts.sweep {
			if median(walls(sw.raw[p])) < median(walls(sw.raw[rawP])) {
				rawP = p
			}
		}
		fmt.Printf("  the raw floor's parallelism: P=%d (fastest in the sweep)\n", rawP)
	}
	for r := range b.opts.rounds {
		mr, err := raw(rawP, r == 0)
		if err != nil {
			return 0, nil, nil, fmt.Errorf("round %d, raw: %w", r+1, err)
		}
		mp, err := prov(b.opts.parallel, r == 0)
		if err != nil {
			return 0, nil, nil, fmt.Errorf("round %d, provisioner: %w", r+1, err)
		}
		raws, provs = append(raws, mr), append(provs, mp)
		fmt.Printf("  round %d/%d        raw %-9s provisioner %-9s ratio %.2fx\n", r+1, b.opts.rounds, dur(mr.wall), dur(mp.wall),
			ratio(mp.wall, mr.wall))
	}
	return rawP, raws, provs, nil
}

// createWorkload is N consumers created from nothing, each naming ext where it is not empty.
func (b *bench) createWorkload(ctx context.Context, ext string) error {
	wl, tag, title, limit := wlCreate, "c", "create from nothing", 1.25
	if ext != "" {
		wl, tag, title = wlCreateExt, "e", "create from nothing, "+ext+" each"
	}
	m, err := b.newMesh("cmp-" + wl)
	if err != nil {
		return err
	}
	n := b.opts.n
	raw := func(p int, first bool) (measure, error) {
		cs, err := b.consumers(tag, n)
		if err != nil {
			return measure{}, err
		}
		mm, err := b.counted(wl, "raw", n, first, func() (measure, error) {
			return timed(func() error { return b.rawCreate(ctx, cs, ext, p) })
		})
		if err != nil {
			return mm, err
		}
		if err := b.expect(ctx, "raw", names(cs), ext, true); err != nil {
			return mm, err
		}
		return mm, b.cleanup(ctx, names(cs))
	}
	prov := func(p int, first bool) (measure, error) {
		cs, err := b.consumers(tag, n)
		if err != nil {
			return measure{}, err
		}
		if err := m.give(cs, ext); err != nil {
			return measure{}, err
		}
		mm, err := b.counted(wl, "provisioner", n, first, func() (measure, error) { return b.once(ctx, m, p) })
		if err != nil {
			return mm, err
		}
		if err := b.expect(ctx, "provisioner", names(cs), ext, true); err != nil {
			return mm, err
		}
		return mm, b.cleanup(ctx, names(cs))
	}
	if err := b.cleanup(ctx, nil); err != nil {
		return err
	}
	rawP, raws, provs, err := b.pairs(wl, raw, prov)
	if err != nil {
		return err
	}
	b.results = append(b.results, result{workload: title, n: n, raw: raws, prov: provs, rawP: rawP, provP: b.opts.parallel,
		maxRatio: limit, target: fmt.Sprintf("≤ %.2fx", limit)})
	return nil
}

// withdrawWorkload is N consumers the provisioner made (not timed), each with the extension,
// withdrawn with drop: the raw floor drops each database and role; the provisioner is the
// daemon (--on-withdraw drop --drop-after 0s), running over them until it is between passes,
// timed from the end of the hold after the file's rename (to a file listing none) until the
// last of their roles is gone. Both sides drop databases whose files are on disk (cleanup
// syncs after making them), as a server's are.
func (b *bench) withdrawWorkload(ctx context.Context) error {
	const limit = 1.25 // issue 31: every round within 1.25x of the floor, as create
	m, err := b.newMesh("cmp-" + wlWithdraw)
	if err != nil {
		return err
	}
	n := b.opts.n
	made := func() ([]consumer, error) {
		cs, err := b.consumers("w", n)
		if err != nil {
			return nil, err
		}
		if err := m.give(cs, extension); err != nil {
			return nil, err
		}
		if _, err := b.once(ctx, m, b.opts.parallel); err != nil {
			return nil, fmt.Errorf("make the consumers to withdraw: %w", err)
		}
		return cs, b.cleanup(ctx, nil)
	}
	raw := func(p int, first bool) (measure, error) {
		cs, err := made()
		if err != nil {
			return measure{}, err
		}
		mm, err := b.counted(wlWithdraw, "raw", n, first, func() (measure, error) {
			return timed(func() error { return b.rawDrop(ctx, names(cs), p, false) })
		})
		if err != nil {
			return mm, err
		}
		if err := b.expect(ctx, "raw", names(cs), "", false); err != nil {
			return mm, err
		}
		return mm, b.cleanup(ctx, nil)
	}
	prov := func(p int, first bool) (measure, error) {
		cs, err := made()
		if err != nil {
			return measure{}, err
		}
		mm, err := b.daemonWithdraws(ctx, m, cs, p, first)
		if err != nil {
			return mm, err
		}
		if err := b.expect(ctx, "provisioner", names(cs), "", false); err != nil {
			return mm, err
		}
		return mm, b.cleanup(ctx, names(cs))
	}
	rawP, raws, provs, err := b.pairs(wlWithdraw, raw, prov)
	if err != nil {
		return err
	}
	b.results = append(b.results, result{workload: fmt.Sprintf("withdraw %s each, the daemon with --on-withdraw drop --drop-after 0s", extension),
		n: n, raw: raws, prov: provs, rawP: rawP, provP: b.opts.parallel, maxRatio: limit, target: fmt.Sprintf("≤ %.2fx", limit),
		note: "from the end of the mass withdrawal's hold (6 × --withdraw-settle 1s after the file's rename), where the daemon wakes by itself, to the last role gone; each side's databases written to disk first"})
	return nil
}

// withdrawSettle is the daemon's --withdraw-settle in the withdraw workload, the least it
// takes; a file that lists none of the consumers is a mass withdrawal, held six times that
// (massHold) from the change before the daemon withdraws anything.
const (
	withdrawSettle = time.Second
	massHold       = 6 * withdrawSettle
)

// daemonWithdraws starts the daemon over m, which lists cs (made already), with --parallel p and
// drop at once, waits until it is between passes with every one applied, then replaces the file
// by one that lists none and times until none of their roles is left. The CPU counted, the
// daemon's and the machine's, is from the hold's end, as the time is: over the hold the
// machine does whatever else it runs, which the raw side's round does not carry.
func (b *bench) daemonWithdraws(ctx context.Context, m *mesh, cs []consumer, p int, first bool) (measure, error) {
	d, err := b.startDaemon(m, "--parallel", strconv.Itoa(p), "--on-withdraw", "drop", "--drop-after", "0s",
		"--withdraw-settle", withdrawSettle.String(), "--verify-every", "1h")
	if err != nil {
		return measure{}, err
	}
	grace := time.Minute
	defer func() {
		if ctx.Err() != nil {
			grace = 3 * time.Second
		}
		d.stop(grace)
	}()
	err = poll.Until(ctx, fmt.Sprintf("%d consumers applied", len(cs)), b.opts.timeout, 50*time.Millisecond, func() (bool, error) {
		v, err := d.metric(ctx, "provisioner_consumers", `state="applied"`)
		return int(v) == len(cs), err
	})
	if err != nil {
		return measure{}, err
	}
	conn, err := b.connect(ctx, "")
	if err != nil {
		return measure{}, err
	}
	defer closeConn(conn)
	if err := b.quiet(ctx, d, conn); err != nil {
		return measure{}, err
	}
	return b.counted(wlWithdraw, "provisioner", len(cs), first, func() (measure, error) {
		var t0 time.Time
		var mach0, cpu0 time.Duration
		held := false // the CPU counted from the hold's end, as the time is
		hold := func() {
			if !held {
				held, mach0, cpu0 = true, machineCPU(), processCPU(d.cmd.Process.Pid)
			}
		}
		if err := m.write(nil, "", func() { t0 = time.Now() }); err != nil {
			return measure{}, err
		}
		for _, c := range cs {
			_ = os.Remove(m.secret(c.name)) // the mesh takes a withdrawn consumer's secret away
		}
		var took time.Duration
		// Every 20 ms: a tighter poll is load on the server that the raw side does not carry
		// (at 2 ms it was 47 queries per consumer), and a session that must absorb each drop's
		// barrier. The daemon wakes by itself when the hold ends (it counts from the pass that
		// saw the change, a few milliseconds after the rename, which is counted).
		err := poll.Until(ctx, "every role dropped", b.opts.timeout, 20*time.Millisecond, func() (bool, error) {
			var left int
			if time.Since(t0) >= massHold {
				hold()
			}
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_roles WHERE rolname = ANY($1)", names(cs)).Scan(&left); err != nil {
				return false, fmt.Errorf("count the roles left: %w", err)
			}
			took = time.Since(t0)
			return left == 0, nil
		})
		hold() // where none was left before the hold's end (never, by design): from here
		// The hold is the brake's, by design, not the withdrawal's pace: not counted.
		return measure{wall: took - massHold, client: processCPU(d.cmd.Process.Pid) - cpu0, machine: machineCPU() - mach0}, err
	})
}

// startOverWorkload is the provisioner's --once over consumers it already made, which checks
// each and writes nothing, against one catalog query over them.
func (b *bench) startOverWorkload(ctx context.Context) error {
	m, err := b.newMesh("cmp-" + wlStartOver)
	if err != nil {
		return err
	}
	n := b.opts.converged
	cs, err := b.consumers("s", n)
	if err != nil {
		return err
	}
	if b.opts.otherRoles > 0 {
		if err := b.otherRoles(ctx, b.opts.otherRoles); err != nil {
			return err
		}
		defer func() {
			if err := b.dropOtherRoles(context.WithoutCancel(ctx), b.opts.otherRoles); err != nil {
				fmt.Fprintf(os.Stderr, "compare: drop the other roles: %v\n", err)
			}
		}()
		fmt.Printf("  %d other roles made, in %d groups (chains of ten), a member each (not timed)\n", b.opts.otherRoles, otherGroups)
	}
	if err := m.give(cs, ""); err != nil {
		return err
	}
	setup, err := b.once(ctx, m, b.opts.parallel)
	if err != nil {
		return fmt.Errorf("make the consumers: %w", err)
	}
	fmt.Printf("  %d consumers made by the provisioner in %s (not timed)\n", n, dur(setup.wall))
	if err := b.expect(ctx, "provisioner", names(cs), "", true); err != nil {
		return err
	}
	if err := b.cleanup(ctx, nil); err != nil {
		return err
	}
	before, err := b.fingerprint(ctx, names(cs))
	if err != nil {
		return err
	}
	var raws, provs []measure
	note := "no change written"
	for r := range b.opts.rounds {
		mr, err := b.counted(wlStartOver, "raw", n, r == 0, func() (measure, error) {
			return timed(func() error { return b.rawCatalog(ctx, names(cs)) })
		})
		if err != nil {
			return fmt.Errorf("round %d, raw: %w", r+1, err)
		}
		mp, err := b.counted(wlStartOver, "provisioner", n, r == 0, func() (measure, error) { return b.once(ctx, m, b.opts.parallel) })
		if err != nil {
			return fmt.Errorf("round %d, provisioner: %w", r+1, err)
		}
		after, err := b.fingerprint(ctx, names(cs))
		if err != nil {
			return err
		}
		if after != before {
			note = "THE PROVISIONER WROTE to roles, databases or records it had made"
			before = after
		}
		raws, provs = append(raws, mr), append(provs, mp)
		fmt.Printf("  round %d/%d        raw %-9s provisioner %-9s ratio %.0fx\n", r+1, b.opts.rounds, dur(mr.wall), dur(mp.wall),
			ratio(mp.wall, mr.wall))
	}
	workload := fmt.Sprintf("start over %d converged (--once)", n)
	if b.opts.otherRoles > 0 {
		workload = fmt.Sprintf("start over %d converged (--once), %d other roles", n, b.opts.otherRoles)
	}
	b.results = append(b.results, result{workload: workload, n: n, raw: raws, prov: provs,
		rawP: 1, provP: b.opts.parallel, target: "floor: one catalog query", note: note})
	if b.opts.workloads[wlFileChange] {
		return b.cleanup(ctx, names(cs))
	}
	return nil
}

// fingerprint changes whenever any of the roles, their databases or their records is written.
func (b *bench) fingerprint(ctx context.Context, cs []string) (string, error) {
	conn, err := b.connect(ctx, "")
	if err != nil {
		return "", err
	}
	defer closeConn(conn)
	var fp string
	err = conn.QueryRow(ctx, `
SELECT coalesce(md5(string_agg(r.xmin::text || '/' || d.xmin::text || '/' || coalesce(s.xmin::text, ''), ',' ORDER BY r.rolname)), '')
FROM pg_authid r JOIN pg_database d ON d.datdba = r.oid
LEFT JOIN pg_shdescription s ON s.objoid = r.oid AND s.classoid = 'pg_authid'::regclass
WHERE r.rolname = ANY($1)`, cs).Scan(&fp)
	if err != nil {
		return "", fmt.Errorf("fingerprint: %w", err)
	}
	return fp, nil
}

// fileChangeWorkload runs the daemon over consumers that each name the extension, waits until
// it has made them all and a verify pass is due, then adds one consumer to the file (its secret
// first, then the file replaced by rename) and times until its database exists.
func (b *bench) fileChangeWorkload(ctx context.Context) error {
	const verifyEvery = time.Second
	m, err := b.newMesh("cmp-" + wlFileChange)
	if err != nil {
		return err
	}
	n := b.opts.converged
	cs, err := b.consumers("f", n)
	if err != nil {
		return err
	}
	if err := m.give(cs, extension); err != nil {
		return err
	}
	d, err := b.startDaemon(m, "--every", "1h", "--verify-every", verifyEvery.String(), "--parallel", strconv.Itoa(b.opts.parallel))
	if err != nil {
		return err
	}
	defer func() {
		// At the end, as an operator would; interrupted, without waiting for its pass to end.
		grace := time.Minute
		if ctx.Err() != nil {
			grace = 3 * time.Second
		}
		d.stop(grace)
	}()
	start := time.Now()
	applied := func(want int) func() (bool, error) {
		return func() (bool, error) {
			v, err := d.metric(ctx, "provisioner_consumers", `state="applied"`)
			return int(v) == want, err
		}
	}
	if err := poll.Until(ctx, fmt.Sprintf("%d consumers applied", n), b.opts.timeout, 200*time.Millisecond, applied(n)); err != nil {
		return err
	}
	fmt.Printf("  %d consumers with %s made by the daemon in %s (not timed)\n", n, extension, dur(time.Since(start)))
	conn, err := b.connect(ctx, "")
	if err != nil {
		return err
	}
	defer closeConn(conn)
	if err := b.quiet(ctx, d, conn); err != nil {
		return err
	}
	var lat []measure
	for k := range b.opts.changes {
		// The last pass began longer ago than --verify-every: the pass the change starts verifies.
		if err := sleep(ctx, verifyEvery+500*time.Millisecond); err != nil {
			return err
		}
		passes, err := d.metric(ctx, "provisioner_passes_total", "")
		if err != nil {
			return err
		}
		fresh, err := b.consumers("fn", 1)
		if err != nil {
			return err
		}
		c := fresh[0]
		cs = append(cs, c)
		if err := replace(m.secret(c.name), []byte(c.password+"\n")); err != nil {
			return err
		}
		var t0 time.Time
		if err := m.write(cs, extension, func() { t0 = time.Now() }); err != nil {
			return err
		}
		var took time.Duration
		err = poll.Until(ctx, "database "+c.name, time.Minute, time.Millisecond, func() (bool, error) {
			var exists bool
			if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", c.name).Scan(&exists); err != nil {
				return false, fmt.Errorf("look for database %s: %w", c.name, err)
			}
			took = time.Since(t0)
			return exists, nil
		})
		if err != nil {
			return err
		}
		lat = append(lat, measure{wall: took})
		// The pass that made it goes on to verify the others; the next change waits for its end.
		passDone := func() (bool, error) {
			v, err := d.metric(ctx, "provisioner_passes_total", "")
			return v >= passes+1, err
		}
		if err := poll.Until(ctx, "the pass of the change", b.opts.timeout, 100*time.Millisecond, passDone); err != nil {
			return err
		}
		if err := poll.Until(ctx, "the new consumer applied", b.opts.timeout, 100*time.Millisecond, applied(n+k+1)); err != nil {
			return err
		}
		if err := b.quiet(ctx, d, conn); err != nil {
			return err
		}
		fmt.Printf("  change %d/%d: file replaced to database %s in %s\n", k+1, b.opts.changes, c.name, dur(took))
	}
	b.results = append(b.results, result{workload: fmt.Sprintf("file change to database: one added to %d with %s, verify due", n, extension),
		n: n, prov: lat, provP: b.opts.parallel, maxWall: 500 * time.Millisecond, target: "< 500 ms"})
	return nil
}

// quiet waits until the daemon is between passes: for two seconds, its pass count unchanged and
// none of its sessions busy at any look (running a statement, or connected to a consumer's
// database, which its checks are).
func (b *bench) quiet(ctx context.Context, d *daemon, conn *pgx.Conn) error {
	since, last := time.Now(), -2.0
	return poll.Until(ctx, "the provisioner between passes", b.opts.timeout, 20*time.Millisecond, func() (bool, error) {
		passes, err := d.metric(ctx, "provisioner_passes_total", "")
		if err != nil {
			return false, err
		}
		var busy int
		err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE application_name = $1 AND (state IS DISTINCT FROM 'idle' OR datname IS DISTINCT FROM 'postgres')`, provApp).Scan(&busy)
		if err != nil {
			return false, fmt.Errorf("look at the provisioner's sessions: %w", err)
		}
		if busy > 0 || passes != last {
			since, last = time.Now(), passes
		}
		return time.Since(since) >= 2*time.Second, nil
	})
}

// write replaces the contributions file by rename with cs, each naming ext, calling
// beforeRename just before the rename: the instant the mesh's change lands.
func (m *mesh) write(cs []consumer, ext string, beforeRename func()) error {
	raw, err := m.contents(cs, ext)
	if err != nil {
		return err
	}
	tmp := filepath.Join(m.dir, ".contributions.json.tmp")
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return err
	}
	beforeRename()
	return os.Rename(tmp, m.file)
}
