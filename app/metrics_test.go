package app_test

import (
	"io"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/app"
	"github.com/novox/postgres-provider/domain"
)

func scrape(t *testing.T, m *app.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, err := io.ReadAll(rec.Body)
	is.New(t).NoErr(err)
	return string(body)
}

func TestPassesAreCounted(t *testing.T) {
	is := is.New(t)
	m := app.NewMetrics("postgres")
	m.Observe(domain.Report{FileRead: true, Created: 2, Failures: 1, Took: 20 * time.Millisecond, Consumers: map[string]domain.State{
		"a": domain.StateApplied, "b": domain.StateApplied, "c": domain.StateFailing}}, true)
	m.Observe(domain.Report{FileRead: true, Reapplied: 1, Withdrawn: 1, Unchecked: 1, CheckErrors: 1, Consumers: map[string]domain.State{
		"a": domain.StateBraked, "c": domain.StateWaitingForSecret}}, true)
	m.Observe(domain.Report{Unchecked: 5, ServerProblem: "down"}, false) // the file unreadable, the server down: no check made
	out := scrape(t, m)
	for _, want := range []string{
		`provisioner_passes_total{resource="postgres"} 3`,
		`provisioner_creates_total{resource="postgres"} 2`,
		`provisioner_reapplies_total{resource="postgres"} 1`,
		`provisioner_withdrawals_total{resource="postgres"} 1`,
		`provisioner_failures_total{resource="postgres"} 1`,
		`provisioner_holds_errors_total{resource="postgres"} 1`,
		`provisioner_consumers{resource="postgres",state="braked"} 1`,
		`provisioner_consumers{resource="postgres",state="waiting_for_secret"} 1`,
		`provisioner_consumers{resource="postgres",state="applied"} 0`,
		`provisioner_consumers{resource="postgres",state="failing"} 0`,
		`provisioner_contributions_readable{resource="postgres"} 0`,
		`provisioner_backend_reachable{resource="postgres"} 0`,
		`provisioner_pass_duration_seconds_count{resource="postgres"} 3`,
		`provisioner_pass_duration_seconds_bucket{resource="postgres",le="0.05"} 3`,
		`provisioner_pass_duration_seconds_bucket{resource="postgres",le="0.01"} 2`,
	} {
		is.True(strings.Contains(out, want+"\n")) // each metric as the last passes left it
	}
}

func TestBuildInfoCarriesTheReleaseAndTheCommit(t *testing.T) {
	is := is.New(t)
	is.True(regexp.MustCompile(`^0\.\d+\.\d+$`).MatchString(app.Release)) // a 0.x.y release, kept in the source
	out := scrape(t, app.NewMetrics("postgres"))
	line := regexp.MustCompile(`(?m)^provisioner_build_info\{commit="([^"]+)",goversion="go[^"]+",resource="postgres",version="([^"]+)"\} 1$`).FindStringSubmatch(out)
	is.True(line != nil)           // version and commit labels, and 1
	is.Equal(line[2], app.Release) // the release, not a bare commit
	is.True(line[1] != "")         // a commit, or "unknown" where the build recorded none
}

// TestARolloutIsAMetricAndAHaltedOneFiresTheAlert: each rollout's progress is a series, a halted
// one counts in the gauge ProvisionerExtensionRolloutHalted watches, and one that ended leaves
// no series behind.
func TestARolloutIsAMetricAndAHaltedOneFiresTheAlert(t *testing.T) {
	is := is.New(t)
	m := app.NewMetrics("postgres")
	m.Observe(domain.Report{FileRead: true, Rollouts: []domain.Rollout{
		{Key: "extension vector -> 0.8.6", Subject: "extension vector", From: "0.8.0", To: "0.8.6", Done: 3, Total: 20},
		{Key: "extension novox -> 1.2", Subject: "extension novox", From: "1.1", To: "1.2", Total: 20, Halted: "c00: update novox 1.1 -> 1.2 failed: boom"},
	}}, true)
	out := scrape(t, m)
	for _, want := range []string{
		`provisioner_extension_rollout_consumers{key="extension vector -> 0.8.6",of="done",resource="postgres"} 3`,
		`provisioner_extension_rollout_consumers{key="extension vector -> 0.8.6",of="total",resource="postgres"} 20`,
		`provisioner_extension_rollout_consumers{key="extension novox -> 1.2",of="halted",resource="postgres"} 1`,
		`provisioner_extension_rollouts_halted{resource="postgres"} 1`, // what the alert fires on (> 0)
	} {
		is.True(strings.Contains(out, want+"\n")) // each rollout as the pass left it
	}
	m.Observe(domain.Report{FileRead: true}, true)
	out = scrape(t, m)
	is.True(!strings.Contains(out, "provisioner_extension_rollout_consumers{")) // over: gone
	is.True(strings.Contains(out, `provisioner_extension_rollouts_halted{resource="postgres"} 0`+"\n"))
}
