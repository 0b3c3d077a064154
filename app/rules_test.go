package app_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/matryer/is"
	"go.yaml.in/yaml/v3"

	"github.com/novox/postgres-provider/app"
	"github.com/novox/postgres-provider/domain"
)

// rulesFile is Prometheus' rule file format, as much of it as the alerts use.
type rulesFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// exposed are the metric names the provisioner serves, as PromQL may name them: a histogram's
// series and its _bucket, _sum and _count.
func exposed(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) (\S+)$`).FindAllStringSubmatch(scrape(t, app.NewMetrics("postgres")), -1) {
		names[m[1]] = true
		if m[2] == "histogram" || m[2] == "summary" {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				names[m[1]+suffix] = true
			}
		}
	}
	return names
}

var (
	// What of an expression is not a metric's name: strings, label matchers, grouping lists,
	// ranges, numbers and durations.
	quoted   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	matchers = regexp.MustCompile(`\{[^}]*\}`)
	grouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	ranges   = regexp.MustCompile(`\[[^\]]*\]`)
	numbers  = regexp.MustCompile(`\b\d[a-zA-Z0-9_.]*`) // 0, 1e3, an offset's 1m
	ident    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	keywords = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right", "inf", "nan"}
	// A state the expression asks provisioner_consumers about.
	stateMatch = regexp.MustCompile(`state=~?"([^"]*)"`)
)

// metricsOf are the metric names expr names (not functions, keywords, labels nor numbers).
func metricsOf(expr string) []string {
	rest := quoted.ReplaceAllString(expr, `""`)
	rest = matchers.ReplaceAllString(rest, " ")
	rest = grouping.ReplaceAllString(rest, " ")
	rest = ranges.ReplaceAllString(rest, " ")
	rest = numbers.ReplaceAllString(rest, " ")
	var names []string
	for _, m := range ident.FindAllStringSubmatch(rest, -1) {
		word := strings.TrimRight(m[0], " \t\n(")
		if m[1] != "" || slices.Contains(keywords, strings.ToLower(word)) {
			continue // a function, or PromQL's own word
		}
		names = append(names, word)
	}
	return names
}

func TestMetricsOfReadsAnExpression(t *testing.T) {
	is := is.New(t)
	is.Equal(metricsOf(`sum by (instance, resource) (rate(provisioner_failures_total{state=~"a|b", x="y z"}[5m] offset 1m)) > 0 and on (instance) provisioner_leader == 1`),
		[]string{"provisioner_failures_total", "provisioner_leader"}) // names, not functions, labels, keywords or ranges
	is.Equal(metricsOf(`no_such_metric > 1e3`), []string{"no_such_metric"}) // whatever it names, known or not
}

func TestTheAlertingRulesNameOnlyMetricsThatExist(t *testing.T) {
	is := is.New(t)
	raw, err := os.ReadFile("../deploy/prometheus/rules.yml")
	is.NoErr(err)
	var rules rulesFile
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true)
	is.NoErr(dec.Decode(&rules)) // the file is Prometheus' rule format, no stray keys
	have := exposed(t)
	is.True(have["provisioner_consumers"] && have["provisioner_pass_duration_seconds_bucket"]) // the registry as served

	alerts := map[string]bool{}
	is.True(len(rules.Groups) > 0)
	for _, g := range rules.Groups {
		is.True(g.Name != "")
		for _, r := range g.Rules {
			alerts[r.Alert] = true
			is.True(r.Alert != "" && r.Expr != "")                                           // an alert with an expression
			is.True(r.Labels["severity"] == "warning" || r.Labels["severity"] == "critical") // routed by severity
			is.True(r.Annotations["summary"] != "" && r.Annotations["description"] != "")
			is.True(r.For == "" || regexp.MustCompile(`^\d+[smh]$`).MatchString(r.For)) // a Prometheus duration
			names := metricsOf(r.Expr)
			is.True(len(names) > 0) // each alert watches a metric
			for _, name := range names {
				if !have[name] {
					t.Errorf("%s: %s is not a metric the provisioner serves", r.Alert, name)
				}
			}
			for _, m := range stateMatch.FindAllStringSubmatch(r.Expr, -1) {
				for _, state := range strings.Split(m[1], "|") {
					if !slices.Contains(domain.States, domain.State(state)) {
						t.Errorf("%s: no consumer is ever in state %q", r.Alert, state)
					}
				}
			}
		}
	}
	for _, want := range []string{"ProvisionerConsumersFailing", "ProvisionerConsumersBraked", "ProvisionerConsumersIncomplete", "ProvisionerServerUnreachable",
		"ProvisionerMassWithdrawalHeld", "ProvisionerNoReplicaLeading", "ProvisionerLoopStuck", "ProvisionerExtensionRolloutHalted"} {
		is.True(alerts[want]) // each thing the issue asks to be alerted on
	}
}
