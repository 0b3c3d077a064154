package app

import (
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

func TestProgressIsSaidAsAPersonReadsIt(t *testing.T) {
	is := is.New(t)
	start := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	p := domain.Progress{Running: true, Pass: 1, Started: start, Doing: "creating", Done: 747, Of: 1000, Since: start}
	now := start.Add(747 * 200 * time.Millisecond) // 5 a second
	is.Equal(progressText(p, now), "creating: 747 of 1,000, about 51 s left")
	is.Equal(progressText(domain.Progress{Running: true, Doing: "checking", Of: 12345, Since: start}, now), "checking: 0 of 12,345") // no estimate yet
	is.Equal(thousands(1234567), "1,234,567")
	is.Equal(roughly(150*time.Second), "3 min")
	is.True(progressOf(p, start.Add(time.Second)) == nil) // not worth saying yet
	doc := progressOf(p, now)
	is.Equal([]int{doc.Done, doc.Of}, []int{747, 1000})
	is.Equal(*doc.LeftSeconds, 51.0)
	is.True(progressOf(domain.Progress{}, now) == nil) // no pass under way
}

func TestCountersMoveAsCallsReturnAndCountOnce(t *testing.T) {
	is := is.New(t)
	m := NewMetrics("postgres")
	m.Progress(domain.Progress{Running: true, Pass: 1, Created: 3})
	is.Equal(value(t, m, "provisioner_creates_total"), 3.0) // before the pass settles
	m.Progress(domain.Progress{Running: true, Pass: 1, Created: 5, Failures: 1})
	is.Equal(value(t, m, "provisioner_creates_total"), 5.0)
	m.Progress(domain.Progress{Pass: 1, Created: 6, Failures: 1}) // the pass's last call
	m.Observe(domain.Report{Created: 6, Failures: 1}, true)
	is.Equal(value(t, m, "provisioner_creates_total"), 6.0) // settled: counted once
	is.Equal(value(t, m, "provisioner_failures_total"), 1.0)
	m.Progress(domain.Progress{Pass: 1, Created: 6, Failures: 1}) // a look between passes
	is.Equal(value(t, m, "provisioner_creates_total"), 6.0)
	m.Progress(domain.Progress{Running: true, Pass: 2, Reapplied: 1})
	m.Observe(domain.Report{Reapplied: 2}, true) // one returned after the last look
	is.Equal(value(t, m, "provisioner_reapplies_total"), 2.0)
	is.Equal(value(t, m, "provisioner_creates_total"), 6.0)
}

func TestPerConsumerMetricsOnlyWhereAskedFor(t *testing.T) {
	is := is.New(t)
	m := NewMetrics("postgres")
	m.Usage(map[string]ports.Usage{"letta": {DatabaseBytes: 8 << 20, Connections: 2}})
	is.Equal(series(t, m, "provisioner_consumer_database_bytes"), 0) // not asked: no series per consumer
	m.PerConsumer("postgres")
	m.Usage(map[string]ports.Usage{"letta": {DatabaseBytes: 8 << 20, Connections: 2}, "other": {}})
	is.Equal(series(t, m, "provisioner_consumer_database_bytes"), 2)
	m.Usage(map[string]ports.Usage{"letta": {DatabaseBytes: 9 << 20, Connections: 1}})
	is.Equal(series(t, m, "provisioner_consumer_connections"), 1) // one gone, its series too
	is.Equal(value(t, m, "provisioner_consumer_connections"), 1.0)
}

func TestStatusShowsUsageAndAPassUnderWay(t *testing.T) {
	is := is.New(t)
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	var out strings.Builder
	writeStatus(&out, statusDoc{Resource: "postgres", Version: "v1", Role: "acting", Ready: true,
		Pass:      &progressDoc{Text: "creating: 747 of 1,000, about 40 s left", RunningSeconds: 150},
		Consumers: []*domain.Status{{As: "letta", State: domain.StateApplied, Since: now}, {As: "new", State: domain.StateApplied, Since: now}},
		Usage:     map[string]usageDoc{"letta": {DatabaseBytes: 7_654_321, Connections: 3}}}, now)
	is.Equal(out.String(), `provisioner v1 for postgres, acting, ready
pass under way for 2m30s: creating: 747 of 1,000, about 40 s left
CONSUMER  STATE    SINCE   CHECKED  NEXT CHECK  SIZE    CONNS  DRIFT / LAST ERROR
letta     applied  0s ago  -        -           7.7 MB  3      -
new       applied  0s ago  -        -           -       -      -
`)
}

// value is the sum of the values of the metric name's series.
func value(t *testing.T, m *Metrics, name string) float64 {
	t.Helper()
	families, err := m.reg.Gather()
	is.New(t).NoErr(err)
	sum := 0.0
	for _, f := range families {
		if f.GetName() == name {
			for _, x := range f.GetMetric() {
				sum += x.GetCounter().GetValue() + x.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// series counts the series of the metric name.
func series(t *testing.T, m *Metrics, name string) int {
	t.Helper()
	families, err := m.reg.Gather()
	is.New(t).NoErr(err)
	for _, f := range families {
		if f.GetName() == name {
			return len(f.GetMetric())
		}
	}
	return 0
}
