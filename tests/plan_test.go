package tests

import (
	"encoding/json"
	"fmt"
	neturl "net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/novox/postgres-provider/tests/pgserver"
)

// planned is one consumer of `provisioner plan --format json`.
type planned struct {
	As       string    `json:"as"`
	Act      string    `json:"act"`
	Why      []string  `json:"why"`
	At       time.Time `json:"at"`
	Held     bool      `json:"held"`
	Earliest bool      `json:"earliest"`
}

type planDoc struct {
	Consumers      []planned `json:"consumers"`
	MassWithdrawal bool      `json:"mass_withdrawal"`
	Pending        bool      `json:"pending"`
}

// of is the plan's line for as.
func (d planDoc) of(t *testing.T, as string) planned {
	t.Helper()
	for _, c := range d.Consumers {
		if c.As == as {
			return c
		}
	}
	t.Fatalf("%s is not in the plan %+v", as, d.Consumers)
	return planned{}
}

func (d planDoc) logins() []string {
	var out []string
	for _, c := range d.Consumers {
		out = append(out, c.As)
	}
	return out
}

// runPlan runs `provisioner plan` with args to its end, in a process group of its own, and
// answers its exit code, stdout and stderr.
func runPlan(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"plan"}, args...)...)
	cmd.Env = os.Environ()
	var stdout, stderr buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	g, err := pgserver.StartGroup(cmd, syscall.SIGKILL)
	if err != nil {
		t.Fatalf("run provisioner plan: %v", err)
	}
	if !g.Wait(onceLimit) {
		g.Stop(syscall.SIGKILL, time.Second)
		t.Fatalf("provisioner plan still ran after %s; killed. It said:\n%s", onceLimit, stderr.String())
	}
	return g.ExitCode(), stdout.String(), stderr.String()
}

// planJSON runs `provisioner plan --format json` and decodes what it printed.
func planJSON(t *testing.T, args ...string) (int, planDoc, string) {
	t.Helper()
	code, stdout, stderr := runPlan(t, append([]string{"--format", "json"}, args...)...)
	var doc planDoc
	if code == 0 || code == 3 {
		if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
			t.Fatalf("plan exited %d with no JSON (%v):\n%s\n%s", code, err, stdout, stderr)
		}
	}
	return code, doc, stdout + stderr
}

// snapshot is what the server holds that a provider could change: every role (its password
// as a digest of the stored verifier), database, role comment (the record), membership and
// role setting, and the extensions of every database that takes connections.
func snapshot(t *testing.T, url string) string {
	t.Helper()
	var catalog string
	err := query(t, url, "", `SELECT coalesce(string_agg(x, E'\n' ORDER BY x), '') FROM (
    SELECT format('role %s %s %s %s %s %s %s %s %s %s %s', rolname, rolsuper, rolinherit, rolcreaterole, rolcreatedb,
                  rolcanlogin, rolreplication, rolbypassrls, rolconnlimit, rolvaliduntil, md5(coalesce(rolpassword, '')))
    FROM pg_catalog.pg_authid
    UNION ALL SELECT format('database %s %s %s %s %s', datname, pg_catalog.pg_get_userbyid(datdba), datallowconn,
                            datistemplate, datacl) FROM pg_catalog.pg_database
    UNION ALL SELECT format('comment %s %s %s', classoid, objoid, description) FROM pg_catalog.pg_shdescription
    UNION ALL SELECT format('member %s %s %s', roleid, member, admin_option) FROM pg_catalog.pg_auth_members
    UNION ALL SELECT format('setting %s %s %s', setdatabase, setrole, setconfig) FROM pg_catalog.pg_db_role_setting) s (x)`,
		&catalog)
	is.New(t).NoErr(err) // read the catalog
	conn, err := connect(ctx, url, "", "", "")
	is.New(t).NoErr(err)
	defer conn.Close(ctx)
	rows, _ := conn.Query(ctx, "SELECT datname::text FROM pg_catalog.pg_database WHERE datallowconn ORDER BY 1")
	dbs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	is.New(t).NoErr(err) // list the databases
	for _, db := range dbs {
		var exts string
		is.New(t).NoErr(query(t, url, db, `SELECT coalesce(string_agg(e.extname || ' ' || e.extversion || ' ' || n.nspname, ', ' ORDER BY 1), '')
FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace`, &exts))
		catalog += "\nextensions of " + db + ": " + exts
	}
	return catalog
}

// sameSnapshot fails the test where two snapshots differ, naming the lines that do (digests,
// never a verifier).
func sameSnapshot(t *testing.T, before, after string) {
	t.Helper()
	if before == after {
		return
	}
	was, now := strings.Split(before, "\n"), strings.Split(after, "\n")
	var diff []string
	for _, l := range was {
		if !slices.Contains(now, l) {
			diff = append(diff, "- "+l)
		}
	}
	for _, l := range now {
		if !slices.Contains(was, l) {
			diff = append(diff, "+ "+l)
		}
	}
	t.Fatalf("the plan changed the server:\n%s", strings.Join(diff, "\n"))
}

// logged are the statements the server logged (log_statement = all) from offset from on, and
// the log's size.
func logged(t *testing.T, srv *pgserver.Server, from int) ([]string, int) {
	t.Helper()
	raw, err := srv.Log()
	is.New(t).NoErr(err) // read the server's log
	var out []string
	// A statement runs to the next line of the log, which starts with the default prefix's time.
	for _, m := range loggedStatement.FindAllSubmatch(raw[from:], -1) {
		out = append(out, string(m[1]))
	}
	return out, len(raw)
}

var loggedStatement = regexp.MustCompile(`(?s)LOG:  (?:statement|execute [^:]*): (.*?)(?:\n\d{4}-\d\d-\d\d \d\d:|\z)`)

// readOnlySession is the one SET a plan sends: each of its sessions made read only once the
// URL's own test of it (target_session_attrs) passed.
const readOnlySession = "SET default_transaction_read_only = on"

// writing is a statement that changes something, or takes a lock a provider's create takes.
var writing = regexp.MustCompile(`(?im)^\s*(CREATE|ALTER|DROP|GRANT|REVOKE|COMMENT|INSERT|UPDATE|DELETE|TRUNCATE|REASSIGN|SECURITY|LOCK|SET|RESET|COPY|PREPARE|COMMIT PREPARED)\b|advisory_lock|set_config|pg_terminate_backend|pg_cancel_backend`)

func TestPlanNamesEveryActionAndChangesNothing(t *testing.T) {
	is := is.New(t)
	srv := ownServer(t, "reading every statement a plan sends", map[string]string{"log_statement": "all"})
	url := srv.URL
	m := newMesh(t)
	held, drifted, leaver := consumer{as: name("held"), password: randomHex(8), extensions: []string{"pg_trgm"}},
		consumer{as: name("drifted"), password: randomHex(8)}, consumer{as: name("leaver"), password: randomHex(8)}
	fresh, plain, super, unwritten := consumer{as: name("fresh"), password: randomHex(8)}, consumer{as: name("plain"), password: randomHex(8)},
		consumer{as: name("super"), password: randomHex(8)}, consumer{as: name("unwritten"), password: randomHex(8)}
	m.give(held, drifted, leaver)
	code, said := runOnce(t, nil, m.args("--once", "--database-url", url)...)
	is.Equal(code, 0) // made
	passStatements, _ := logged(t, srv, 0)
	is.True(slices.ContainsFunc(passStatements, writing.MatchString)) // a pass's writes are seen in the log, so the plan's check can bite
	base := m.args("--database-url", url)
	with := func(more ...string) []string { return slices.Concat(base, more) }

	// A server as the file asks: nothing to do.
	code, doc, _ := planJSON(t, base...)
	is.Equal(code, 0) // nothing to do
	is.Equal(doc.logins(), []string{held.as, drifted.as, leaver.as})
	is.True(!doc.Pending)
	for _, c := range doc.Consumers {
		is.Equal(c.Act, "") // each as asked
	}

	// Behind the provider's back, and a new file.
	is.NoErr(query(t, url, "", fmt.Sprintf(`ALTER ROLE "%s" CONNECTION LIMIT 3`, drifted.as)))
	is.NoErr(query(t, url, "", fmt.Sprintf(`CREATE ROLE "%s" LOGIN PASSWORD 'a-persons-own'`, plain.as)))
	is.NoErr(query(t, url, "", fmt.Sprintf(`CREATE ROLE "%s" LOGIN SUPERUSER`, super.as)))
	m.give(super, held, drifted, fresh, plain, unwritten) // leaver no longer listed
	m.remove(m.secret(unwritten.as))

	before := snapshot(t, url)
	_, from := logged(t, srv, 0)
	start := time.Now()
	code, doc, said = planJSON(t, with("--withdraw-settle", "1h")...)
	statements, _ := logged(t, srv, from)
	sameSnapshot(t, before, snapshot(t, url))
	is.Equal(code, 3) // changes pending
	is.True(doc.Pending)
	is.True(len(statements) > 3) // the plan asked the server (so the check below can bite)
	for _, s := range statements {
		if writing.MatchString(s) && strings.TrimSpace(s) != readOnlySession {
			t.Fatalf("the plan sent a statement that writes or locks: %s", s)
		}
	}
	is.Equal(doc.logins(), []string{super.as, held.as, drifted.as, fresh.as, plain.as, unwritten.as, leaver.as}) // the file's order, then the record's others
	is.Equal(doc.of(t, held.as).Act, "")
	is.Equal(doc.of(t, fresh.as).Act, "create")
	is.Equal(doc.of(t, drifted.as).Act, "repair")
	is.Equal(doc.of(t, drifted.as).Why, []string{"connection limit"}) // what drifted
	is.Equal(doc.of(t, plain.as).Act, "adopt")
	is.True(slices.Contains(doc.of(t, plain.as).Why, "password"))             // what adoption changes
	is.True(slices.Contains(doc.of(t, plain.as).Why, "comment (the record)")) // and writes
	is.Equal(doc.of(t, super.as).Act, "refuse")
	is.True(strings.Contains(doc.of(t, super.as).Why[0], "a superuser")) // why
	is.Equal(doc.of(t, unwritten.as).Act, "wait")
	is.True(strings.Contains(doc.of(t, unwritten.as).Why[0], "secret unreadable"))
	gone := doc.of(t, leaver.as)
	is.Equal(gone.Act, "withdraw")
	is.True(!gone.Held)
	is.True(gone.At.After(start.Add(59*time.Minute)) && gone.At.Before(time.Now().Add(time.Hour))) // after the settle
	for _, c := range []consumer{held, drifted, leaver, fresh, plain, super} {
		is.True(!strings.Contains(said, c.password)) // no password in what the plan says
	}
	is.True(!strings.Contains(said, "a-persons-own"))
	if u, err := neturl.Parse(url); err == nil && u.User != nil {
		pw, _ := u.User.Password()
		is.True(pw == "" || !strings.Contains(said, pw)) // nor the server's
	}

	// The table for people: a row per consumer, what is done to it and why.
	code, table, _ := runPlan(t, with("--withdraw-settle", "1h")...)
	is.Equal(code, 3)
	t.Logf("provisioner plan said:\n%s", table) // for the operators' docs: what a plan looks like
	is.True(strings.HasPrefix(table, "CONSUMER"))
	for _, row := range [][2]string{{super.as, "refuse"}, {drifted.as, "repair"}, {fresh.as, "create"}, {plain.as, "adopt"},
		{unwritten.as, "wait"}, {leaver.as, "withdraw"}} {
		is.True(regexp.MustCompile(`(?m)^` + row[0] + ` +` + row[1] + ` `).MatchString(table)) // the consumer's row names its act
	}
	is.True(strings.Contains(table, "plan: 1 create, 1 adopt, 1 repair, 1 refuse, 1 withdraw, 1 wait, 1 as asked"))

	// The file settled: withdrawn on the next pass.
	m.agedTo(time.Now().Add(-2 * time.Hour))
	code, doc, _ = planJSON(t, with("--withdraw-settle", "1s")...)
	is.Equal(code, 3)
	is.Equal(doc.of(t, leaver.as), planned{As: leaver.as, Act: "withdraw"}) // now

	// Withdrawn by a pass, with the drop policy: dropped --drop-after later.
	dropping := with("--withdraw-settle", "1s", "--on-withdraw", "drop", "--drop-after", "1h")
	withdrawnAt := time.Now()
	runOnce(t, nil, slices.Concat(dropping, []string{"--once"})...) // exits 1: super is refused, unwritten waits
	_, login := roleLeft(t, url, leaver.as)
	is.True(!login) // withdrawn
	code, doc, _ = planJSON(t, dropping...)
	is.Equal(code, 3)
	dropped := doc.of(t, leaver.as)
	is.Equal(dropped.Act, "drop")
	is.True(dropped.At.After(withdrawnAt.Add(59*time.Minute)) && dropped.At.Before(time.Now().Add(time.Hour))) // when
	is.Equal(doc.of(t, fresh.as).Act, "")                                                                      // made by that pass
	is.Equal(doc.of(t, plain.as).Act, "")                                                                      // adopted by it
	is.Equal(doc.of(t, drifted.as).Act, "")                                                                    // repaired by it
	code, doc, _ = planJSON(t, with("--on-withdraw", "drop", "--drop-after", "1ms")...)
	is.Equal(code, 3)
	due := doc.of(t, leaver.as)
	is.Equal(due.Act, "drop") // due by its record's time
	is.True(due.At.IsZero())  // on the next pass
	is.True(due.Earliest)     // of a daemon that has seen it withdrawn that long
	is.True(strings.HasSuffix(strings.Join(due.Why, ""), "a daemon drops it once it has seen it withdrawn for 1ms"))

	// Every listed consumer held, and the withdrawn one kept (retain): nothing to do.
	is.NoErr(query(t, url, "", fmt.Sprintf(`DROP ROLE "%s"`, super.as)))
	m.give(held, drifted, fresh, plain)
	code, doc, _ = planJSON(t, base...)
	is.Equal(code, 0)
	is.Equal(doc.of(t, held.as).Act, "")

	// Could not plan: a torn file, the server down. Bad usage.
	m.writeFile(m.file, `{"requirement": "`+m.resource+`", "given": [`)
	code, _, said = planJSON(t, base...)
	is.Equal(code, 1) // the file torn
	is.True(strings.Contains(said, "could not plan"))
	m.give(held)
	code, _, _ = runPlan(t, with("--bogus")...)
	is.Equal(code, 2) // usage
	code, _, _ = runPlan(t, "--help")
	is.Equal(code, 0)
	is.NoErr(srv.Stop())
	code, _, said = planJSON(t, base...)
	is.Equal(code, 1) // the server down
	is.True(strings.Contains(said, "could not plan"))
}

func TestPlanSaysAMassWithdrawalIsHeld(t *testing.T) {
	is := is.New(t)
	url := pgserver.Shared(t).URL
	m := newMesh(t)
	cs := consumers("mass", 6)
	m.give(cs...)
	code, _ := runOnce(t, nil, m.args("--once", "--database-url", url)...)
	is.Equal(code, 0)
	m.give(cs[0]) // five of six gone, just now
	code, doc, _ := planJSON(t, m.args("--database-url", url, "--withdraw-settle", "1m")...)
	is.Equal(code, 3)
	is.True(doc.MassWithdrawal)
	for _, c := range cs[1:] {
		p := doc.of(t, c.as)
		is.Equal(p.Act, "withdraw")
		is.True(p.Held)                                      // held as a mass withdrawal
		is.True(p.At.After(time.Now().Add(5 * time.Minute))) // six times the settle
	}
	is.Equal(doc.of(t, cs[0].as).Act, "")
}

func TestPlanRunsBesideADaemonHoldingTheLease(t *testing.T) {
	is := is.New(t)
	url := pgserver.Shared(t).URL
	m := newMesh(t)
	cs := consumers("beside", 3, "pg_trgm")
	m.give(cs...)
	p := start(t, nil, daemonArgs(m, url)...)
	eventually(t, "all applied", func() bool { return p.metric(`provisioner_consumers{state="applied"}`) == 3 })
	is.Equal(p.metric("provisioner_leader"), 1.0) // the daemon holds the lease

	code, doc, said := planJSON(t, m.args("--database-url", url)...)
	is.Equal(code, 0) // planned while the daemon leads: nothing to do
	is.Equal(len(doc.Consumers), 3)
	is.True(!strings.Contains(said, "lease"))
	p.passes(2)
	is.Equal(p.metric("provisioner_leader"), 1.0) // and the daemon still leads
}
