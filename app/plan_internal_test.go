package app

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/domain"
)

func TestPlanIsATableWithASummary(t *testing.T) {
	is := is.New(t)
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	var out strings.Builder
	writePlan(&out, domain.Preview{MassWithdrawal: true, Consumers: []domain.Planned{
		{As: "letta", Act: "create", Why: []string{"role letta", "database letta"}},
		{As: "kept", Act: ""},
		{As: "vec", Act: domain.PlanUpdate, Why: []string{"extension vector 0.8.0 to 0.8.1"}},
		{As: "gone", Act: "withdraw", At: now.Add(time.Minute), Held: true, Why: []string{"waits"}},
	}}, now)
	is.Equal(out.String(), `CONSUMER  ACT       WHEN                                                   WHY
letta     create    next pass                                              role letta; database letta
kept      -         -                                                      -
vec       update    next pass                                              extension vector 0.8.0 to 0.8.1
gone      withdraw  2026-12-03T12:01:00Z (in 1m0s), held: mass withdrawal  waits

plan: 1 create, 1 update, 1 withdraw, 1 as asked; the withdrawals are held as a mass withdrawal
`) // every act a line shows is in the summary
}

// The hostile login of issue 19, and a reason with a terminal's clear-screen, stay in their cells.
func TestPlanFieldsFromOutsideStayInTheirCells(t *testing.T) {
	is := is.New(t)
	var out strings.Builder
	writePlan(&out, domain.Preview{Consumers: []domain.Planned{
		{As: "evil\n[provisioner:postgres] h0001: created", Act: "refuse", Why: []string{"role x\x1b[2J\tis a superuser"}},
	}}, time.Now())
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	is.Equal(len(lines), 4)                                    // the header, one row, a blank line, the summary
	is.True(strings.HasPrefix(lines[1], `evil\n[provisioner`)) // the login, escaped, in its row
	is.True(!strings.ContainsAny(out.String(), "\x1b\t\r"))    // no raw control byte
}

func TestPlanExitCodesWithoutAServer(t *testing.T) {
	is := is.New(t)
	run := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := Main(context.Background(), append([]string{"plan"}, args...), nil, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, out, _ := run("--help")
	is.Equal(code, 0) // --help is no usage error
	is.True(strings.HasPrefix(out, "Usage: provisioner plan"))
	code, _, errs := run("--receives", "/c.json", "--format", "yaml")
	is.Equal(code, 2) // a format it does not write
	is.True(strings.Contains(errs, `--format "yaml": want text or json`))
	code, _, _ = run("--every", "soon", "--receives", "/c.json")
	is.Equal(code, 2) // the daemon's flags, checked as the daemon checks them
	code, _, _ = run("--format")
	is.Equal(code, 2)

	torn := filepath.Join(t.TempDir(), "c.json")
	is.NoErr(os.WriteFile(torn, []byte(`{"requirement":"postgres","given":[`), 0o600))
	code, out, errs = run("--format=json", "--receives", torn, "--database-url", "postgres://nobody@127.0.0.1:1/postgres")
	is.Equal(code, 1) // could not plan
	is.Equal(out, "")
	is.True(strings.Contains(errs, "could not plan: contributions file is not JSON"))
}

func TestFormatIsTakenOutOfTheDaemonsFlags(t *testing.T) {
	is := is.New(t)
	format, rest, err := formatOf([]string{"--receives", "/c.json", "-format=json", "--every", "1s"})
	is.NoErr(err)
	is.Equal(format, "json")
	is.Equal(rest, []string{"--receives", "/c.json", "--every", "1s"})
}

// Issue 28, case 6: a drop waits --drop-after from when the acting daemon first saw the
// withdrawal, which a plan alone cannot know; where that daemon answers at --listen, the plan
// times the drop as its /status does, and says so. A standby's answer, or none, leaves the plan's
// earliest.
func TestPlanTimesADropAsTheActingDaemonWill(t *testing.T) {
	is := is.New(t)
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	later := now.Add(24 * time.Hour)
	doc := statusDoc{Role: "acting", Leaving: []domain.Leaving{
		{As: "kept", State: domain.LeavingWithdrawn, DropAt: later},
		{As: "due", State: domain.LeavingWithdrawn, DropAt: now.Add(-time.Second)},
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(doc)
	}))
	defer srv.Close()
	listen := strings.TrimPrefix(srv.URL, "http://")
	plan := func() domain.Preview {
		return domain.Preview{Consumers: []domain.Planned{
			{As: "kept", Act: domain.PlanDrop, Earliest: true}, // the record's time says next pass
			{As: "due", Act: domain.PlanDrop, Earliest: true},
			{As: "other", Act: domain.PlanDrop, At: now.Add(time.Hour), Earliest: true}, // the daemon does not say
		}}
	}

	p := plan()
	fromDaemon(context.Background(), &p, listen, now)
	is.Equal(p.Consumers[0].At, later) // kept a day, as the daemon will
	is.True(!p.Consumers[0].Earliest)
	is.Equal(p.Consumers[0].Why, []string{"when the provisioner at " + listen + " drops it (its /status)"})
	is.True(p.Consumers[1].At.IsZero()) // due: next pass
	is.True(!p.Consumers[1].Earliest)
	is.Equal(p.Consumers[2].At, now.Add(time.Hour))
	is.True(p.Consumers[2].Earliest)

	doc.Role = "standby" // a standby knows nothing of when the acting one drops
	p = plan()
	fromDaemon(context.Background(), &p, listen, now)
	is.True(p.Consumers[0].Earliest)
	is.True(p.Consumers[0].At.IsZero())

	srv.Close() // nobody answers
	p = plan()
	fromDaemon(context.Background(), &p, listen, now)
	is.True(p.Consumers[0].Earliest)
}
