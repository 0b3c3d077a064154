package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/novox/postgres-provider/tests/pgserver"
)

// The delegated verify workload: the daemon, as a role that is not a superuser, over consumers
// it already made, with the defaults of what it checks (--verify-every 1m, --login-check-every
// 1h) and -daemon-flags, for a window of -window; the figure is the server's CPU over that
// window (the postmaster and its live and exited backends, from /proc), against the floor of
// the same window: per verify interval, one catalog query over every consumer as the same role,
// and the logins due (N x verify interval / login interval), each a connection as the next
// consumer in turn with its password. Both figures are the CPU of the server's sessions
// (serverCPU), not of its background processes, and autovacuum is off over both sides' windows
// (its visits to every database it has statistics of are the server's own work). Both sides'
// sessions started are printed beside.

// delegate is the role the workload's daemon runs as: allowed to create roles and databases,
// and nothing more.
const delegate = "cmp_delegate"

const (
	defaultVerifyEvery = time.Minute
	defaultLoginEvery  = time.Hour
)

// delegatedWorkload is the delegated verify pass's server CPU, the daemon against the floor.
func (b *bench) delegatedWorkload(ctx context.Context) error {
	pw, err := b.consumers("pw", 1)
	if err != nil {
		return err
	}
	password := pw[0].password
	if err := b.exec(ctx, "DROP ROLE IF EXISTS "+ident(delegate), "CREATE ROLE "+ident(delegate)+
		" LOGIN CREATEROLE CREATEDB PASSWORD "+literal(password)); err != nil {
		return err
	}
	if b.opts.statements { // the server logs every statement: a provider that is not a superuser refuses to run unless its parameters are not
		if err := b.exec(ctx, "ALTER ROLE "+ident(delegate)+" SET log_parameter_max_length = 0"); err != nil {
			return err
		}
	}
	u, err := url.Parse(b.srv.URL)
	if err != nil {
		return err
	}
	u.User = url.UserPassword(delegate, password)
	q := u.Query()
	q.Set("application_name", provApp)
	u.RawQuery = q.Encode()
	super := b.provURL
	b.provURL = u.String()
	defer func() { b.provURL = super }()

	m, err := b.newMesh("cmp-" + wlDelegated)
	if err != nil {
		return err
	}
	n := b.opts.converged
	cs, err := b.consumers("v", n)
	if err != nil {
		return err
	}
	if err := m.give(cs, ""); err != nil {
		return err
	}
	setup, err := b.once(ctx, m, b.opts.parallel)
	if err != nil {
		return fmt.Errorf("make the consumers: %w", err)
	}
	fmt.Printf("  %d consumers made by the provisioner as %s (not a superuser) in %s (not timed)\n", n, delegate, dur(setup.wall))
	if err := b.expect(ctx, "provisioner", names(cs), "", true); err != nil {
		return err
	}
	pm, err := b.postmaster(ctx)
	if err != nil {
		return err
	}
	// Autovacuum's visits to the idle databases are the server's own work, not either side's:
	// at 1,000 consumers they took 1.1-1.7 s of a 3-minute window, more than the floor's whole
	// window, and what was measured of them before and after the daemon's window (to be taken
	// off it) differed by more than the daemon's excess over the floor. Off for both sides'
	// windows, each figure is what that side makes the server do.
	if err := b.exec(ctx, "ALTER SYSTEM SET autovacuum = off", "SELECT pg_catalog.pg_reload_conf()"); err != nil {
		return err
	}
	defer func() {
		_ = b.exec(context.WithoutCancel(ctx), "ALTER SYSTEM RESET autovacuum", "SELECT pg_catalog.pg_reload_conf()")
	}()
	window := b.opts.window
	passes := max(1, int(window/defaultVerifyEvery))
	logins := (n*int(defaultVerifyEvery/time.Second) + int(defaultLoginEvery/time.Second) - 1) / int(defaultLoginEvery/time.Second)
	var raws, provs []measure
	var memory []string
	next := 0 // the floor logs in as the consumers in turn, as the daemon does: none twice before all once
	for r := range b.opts.rounds {
		sessions := b.sessionsFrom(ctx)
		mr, err := b.counted(wlDelegated, "raw", n, r == 0, func() (measure, error) {
			return serverTimed(pm, func() error {
				for range passes {
					if next, err = b.delegatedFloor(ctx, password, cs, next, logins); err != nil {
						return err
					}
				}
				return nil
			})
		})
		if err != nil {
			return fmt.Errorf("round %d, raw: %w", r+1, err)
		}
		rawSessions := sessions()
		// Only sessions are counted (serverCPU): the server's own upkeep is in neither side's
		// figure, and nothing is taken off either.
		mp, mem, provSessions, err := b.delegatedDaemon(ctx, m, pm, n, window, r == 0)
		if err != nil {
			return fmt.Errorf("round %d, provisioner: %w", r+1, err)
		}
		fmt.Printf("  round %d/%d        sessions started: raw %d, daemon %d\n", r+1, b.opts.rounds, rawSessions, provSessions)
		raws, provs, memory = append(raws, mr), append(provs, mp), append(memory, mem)
		fmt.Printf("  round %d/%d        raw %-9s provisioner %-9s (server CPU over %s) ratio %.2fx; per hour %s; %s\n", r+1, b.opts.rounds,
			dur(mr.wall), dur(mp.wall), dur(window), ratio(mp.wall, mr.wall), dur(perHour(mp.wall, window)), mem)
	}
	b.results = append(b.results, result{workload: fmt.Sprintf("delegated verify, server CPU over %s (defaults)", dur(window)), n: n,
		raw: raws, prov: provs, rawP: 1, provP: b.opts.parallel,
		target: fmt.Sprintf("floor: %d catalog queries and %d logins", passes, passes*logins),
		note:   "memory " + strings.Join(memory, "; ")})
	if err := b.cleanup(ctx, names(cs)); err != nil {
		return err
	}
	return b.exec(ctx, "DROP OWNED BY "+ident(delegate), "DROP ROLE "+ident(delegate))
}

// delegatedFloor is one verify interval's least work for a provider that is not a superuser:
// one catalog query over every consumer's role and database as that role, and logins as
// logins consumers from the next-th on, in turn; it answers where the next interval's begin.
func (b *bench) delegatedFloor(ctx context.Context, password string, cs []consumer, next, logins int) (int, error) {
	cfg := b.cfg.Copy()
	cfg.User, cfg.Password = delegate, password
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return next, fmt.Errorf("connect as %s: %w", delegate, err)
	}
	defer closeConn(conn)
	var found int
	err = conn.QueryRow(ctx, `
SELECT count(*) FROM pg_catalog.pg_roles r JOIN pg_catalog.pg_database d ON d.datname = r.rolname
WHERE r.rolname = ANY($1) AND r.rolcanlogin AND d.datdba = r.oid
  AND pg_catalog.has_database_privilege(d.oid, 'CONNECT') AND pg_catalog.has_database_privilege(d.oid, 'CREATE')
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members m WHERE m.member = r.oid)
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members m WHERE m.roleid = r.oid AND m.member <> (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user))`,
		names(cs)).Scan(&found)
	if err != nil {
		return next, fmt.Errorf("catalog query: %w", err)
	}
	if found != len(cs) {
		return next, fmt.Errorf("catalog query: %d consumers as made, want %d", found, len(cs))
	}
	for range min(logins, len(cs)) {
		c := cs[next]
		next = (next + 1) % len(cs)
		lc := b.cfg.Copy()
		lc.User, lc.Password, lc.Database = c.name, c.password, c.name
		conn, err := pgx.ConnectConfig(ctx, lc)
		if err != nil {
			return next, fmt.Errorf("log in as %s: %w", c.name, err)
		}
		closeConn(conn)
	}
	return next, nil
}

// delegatedDaemon runs the daemon over m with the defaults until it has confirmed every
// consumer and one verify interval more, then measures the server's CPU over window and the
// sessions started in it (and with -statements, in the first round, what its statements took);
// the daemon's heap in use and resident memory are read at the window's end.
func (b *bench) delegatedDaemon(ctx context.Context, m *mesh, pm, n int, window time.Duration, first bool) (measure, string, int, error) {
	d, err := b.startDaemon(m, b.opts.daemonFlags...)
	if err != nil {
		return measure{}, "", 0, err
	}
	defer d.stop(time.Minute)
	deadline := time.Now().Add(b.opts.timeout)
	for {
		applied, err := d.metric(ctx, "provisioner_consumers", `state="applied"`)
		if err != nil {
			return measure{}, "", 0, err
		}
		if int(applied) == n {
			break
		}
		if time.Now().After(deadline) {
			return measure{}, "", 0, fmt.Errorf("%d of %d consumers applied after %s; it said:\n%s", int(applied), n, b.opts.timeout, d.out.String())
		}
		if err := sleep(ctx, time.Second); err != nil {
			return measure{}, "", 0, err
		}
	}
	if err := sleep(ctx, defaultVerifyEvery); err != nil { // past its first verify pass, which a start makes at once
		return measure{}, "", 0, err
	}
	var started int
	mp, err := b.counted(wlDelegated, "provisioner", n, first, func() (measure, error) { // with -statements, what its window's statements took
		s0, sessions := serverCPU(pm), b.sessionsFrom(ctx)
		if err := sleep(ctx, window); err != nil {
			return measure{}, err
		}
		mp := measure{wall: serverCPU(pm) - s0}
		started = sessions()
		return mp, nil
	})
	if err != nil {
		return measure{}, "", 0, err
	}
	heap, err := d.metric(ctx, "go_memstats_heap_inuse_bytes", "")
	if err != nil {
		return measure{}, "", 0, err
	}
	rss, err := d.metric(ctx, "process_resident_memory_bytes", "")
	if err != nil {
		return measure{}, "", 0, err
	}
	return mp, fmt.Sprintf("heap in use %.1f MiB, RSS %.1f MiB", heap/(1<<20), rss/(1<<20)), started, nil
}

// sessionsFrom starts counting the sessions the server starts, by its statistics (each
// backend counts its own at its start; PostgreSQL 14 and later): the answer is how many it has
// started since, the reads' own left out; -1 where either read failed.
func (b *bench) sessionsFrom(ctx context.Context) func() int {
	read := func() int {
		conn, err := b.connect(ctx, "")
		if err != nil {
			return -1
		}
		defer closeConn(conn)
		var n int64
		if err := conn.QueryRow(ctx, "SELECT coalesce(sum(sessions), 0)::bigint FROM pg_catalog.pg_stat_database").Scan(&n); err != nil {
			return -1
		}
		return int(n)
	}
	from := read() // its own session counted in it
	return func() int {
		to := read()
		if from < 0 || to < 0 {
			return -1
		}
		return to - from - 1 // less the second read's own session
	}
}

// exec runs each statement as the superuser, on one connection.
func (b *bench) exec(ctx context.Context, statements ...string) error {
	conn, err := b.connect(ctx, "")
	if err != nil {
		return err
	}
	defer closeConn(conn)
	for _, s := range statements {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// postmaster is the server's postmaster process: the parent of a backend.
func (b *bench) postmaster(ctx context.Context) (int, error) {
	conn, err := b.connect(ctx, "")
	if err != nil {
		return 0, err
	}
	defer closeConn(conn)
	var backend int
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.pg_backend_pid()").Scan(&backend); err != nil {
		return 0, err
	}
	return pgserver.Postmaster(backend)
}

// serverTimed runs fn and measures, as wall, the server's CPU over it.
func serverTimed(pm int, fn func() error) (measure, error) {
	s0 := serverCPU(pm)
	err := fn()
	return measure{wall: serverCPU(pm) - s0}, err
}

// serverCPU is the CPU time of the sessions of the server of postmaster pm (pgserver.SessionsCPU:
// not its background processes'); 0 where /proc does not show it.
func serverCPU(pm int) time.Duration {
	d, _ := pgserver.SessionsCPU(pm)
	return d
}

// otherGroups is how many groups the other roles are members of.
const otherGroups = 200

// otherRoles makes n roles that are no consumer's, as a server grown around the provider has
// them: each a member of one of otherGroups groups, the groups in chains of ten.
func (b *bench) otherRoles(ctx context.Context, n int) error {
	return b.exec(ctx, fmt.Sprintf(`DO $$ BEGIN
  FOR g IN 1..%[1]d LOOP EXECUTE format('CREATE ROLE cmp_group_%%s NOLOGIN', g); END LOOP;
  FOR g IN 2..%[1]d LOOP IF g %% 10 <> 1 THEN EXECUTE format('GRANT cmp_group_%%s TO cmp_group_%%s', g-1, g); END IF; END LOOP;
  FOR i IN 1..%[2]d LOOP
    EXECUTE format('CREATE ROLE cmp_other_%%s LOGIN', i);
    EXECUTE format('GRANT cmp_group_%%s TO cmp_other_%%s', 1 + i %% %[1]d, i);
  END LOOP;
END $$`, otherGroups, n), "ANALYZE pg_catalog.pg_authid", "ANALYZE pg_catalog.pg_auth_members")
}

// dropOtherRoles drops what otherRoles made, a thousand roles a transaction (a lock each).
func (b *bench) dropOtherRoles(ctx context.Context, n int) error {
	for from := 1; from <= n; from += 1000 {
		if err := b.exec(ctx, fmt.Sprintf(`DO $$ BEGIN
  FOR i IN %d..%d LOOP EXECUTE format('DROP ROLE cmp_other_%%s', i); END LOOP; END $$`, from, min(n, from+999))); err != nil {
			return err
		}
	}
	return b.exec(ctx, fmt.Sprintf(`DO $$ BEGIN
  FOR g IN REVERSE %d..1 LOOP EXECUTE format('DROP ROLE cmp_group_%%s', g); END LOOP; END $$`, otherGroups))
}

// perHour is d over window as a rate per hour.
func perHour(d, window time.Duration) time.Duration { return perWindow(d, window, time.Hour) }

// perWindow is d over over as the same rate over window.
func perWindow(d, over, window time.Duration) time.Duration {
	return time.Duration(float64(d) * float64(window) / float64(over))
}
