package app

import (
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

// Metrics is what the reconcile loop does, in Prometheus' format on a registry of its own:
// consumers by state, creates, re-applies, withdrawals and failures as counters, pass duration
// as a histogram, and whether the contributions file and the server were last reachable.
type Metrics struct {
	reg *prometheus.Registry

	consumers          *prometheus.GaugeVec
	passes             prometheus.Counter
	creates, reapplies prometheus.Counter
	withdrawals, drops prometheus.Counter
	held, mass         prometheus.Gauge
	dropsHeld          *prometheus.GaugeVec
	// archives count what the backend archived (ports.Archiving); archived is what they last counted.
	archives, archiveFailures, archiveBytes, archiveSeconds prometheus.Counter
	archived                                                ports.ArchiveCounts
	// modes are the modes the backend's role was found in (Mode), each a series.
	modes             []string
	failures          prometheus.Counter
	unchecked         prometheus.Counter
	duration          prometheus.Histogram
	readable, reached prometheus.Gauge
	leader            prometheus.Gauge
	mode              *prometheus.GaugeVec
	halted            prometheus.Gauge
	rollout           *prometheus.GaugeVec

	// per is each consumer's usage, where asked for (usage.go).
	per *perConsumer

	mu sync.Mutex
	// counted is what the counters already hold of the pass under way, by Progress, so that
	// Observe adds only the rest.
	counted domain.Progress
	// observed is the last pass Observe counted, whose Progress adds nothing more.
	observed int64
}

// NewMetrics returns Metrics for the given resource, with Go and process metrics beside them.
func NewMetrics(resource string) *Metrics {
	labels := prometheus.Labels{"resource": resource}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		consumers: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "provisioner_consumers",
			Help: "Listed consumers by state after the last pass that read the contributions file.", ConstLabels: labels}, []string{"state"}),
		passes: prometheus.NewCounter(prometheus.CounterOpts{Name: "provisioner_passes_total",
			Help: "Reconcile passes run.", ConstLabels: labels}),
		creates: prometheus.NewCounter(prometheus.CounterOpts{Name: "provisioner_creates_total",
			Help: "Creates that succeeded for consumers that were new or changed.", ConstLabels: labels}),
		reapplies: prometheus.NewCounter(prometheus.CounterOpts{Name: "provisioner_reapplies_total",
			Help: "Creates that succeeded for consumers the backend no longer held.", ConstLabels: labels}),
		withdrawals: prometheus.NewCounter(prometheus.CounterOpts{Name: "provisioner_withdrawals_total",
			Help: "Consumers withdrawn from the backend.", ConstLabels: labels}),
		drops: prometheus.NewCounter(prometheus.CounterOpts{Name: "provisioner_drops_total",
			Help: "Consumers dropped from the backend, data and all.", ConstLabels: labels}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{Name: "provisioner_withdrawals_held",
			Help: "Consumers the file no longer lists whose withdrawal waits for the file to settle.", ConstLabels: labels}),
		dropsHeld: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "provisioner_drops_held",
			Help:        "Withdrawn consumers whose drop waits for its archive: under way (archiving), or held because it failed (failed).",
			ConstLabels: labels}, []string{"archive"}),
		archives: prometheus.NewCounter(prometheus.CounterOpts{Name: "provisioner_archives_total",
			Help: "Archives made and checked before a drop (--archive-to, --archive-command).", ConstLabels: labels}),
		archiveFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "provisioner_archive_failures_total",
			Help: "Archives that failed, each holding its drop.", ConstLabels: labels}),
		archiveBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "provisioner_archive_bytes_total",
			Help: "Bytes of the archives made.", ConstLabels: labels}),
		archiveSeconds: prometheus.NewCounter(prometheus.CounterOpts{Name: "provisioner_archive_seconds_total",
			Help: "Seconds the archives made took, dump and check.", ConstLabels: labels}),
		mass: prometheus.NewGauge(prometheus.GaugeOpts{Name: "provisioner_mass_withdrawal",
			Help: "1 while a withdrawal of more than half of the managed consumers is held.", ConstLabels: labels}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "provisioner_failures_total",
			Help: "Creates, removes and drops that failed.", ConstLabels: labels}),
		unchecked: prometheus.NewCounter(prometheus.CounterOpts{Name: "provisioner_holds_errors_total",
			Help: "Checks made that the backend did not answer (failed or timed out); none while it cannot be used.", ConstLabels: labels}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "provisioner_pass_duration_seconds",
			Help: "How long a reconcile pass took.", ConstLabels: labels,
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60}}),
		readable: prometheus.NewGauge(prometheus.GaugeOpts{Name: "provisioner_contributions_readable",
			Help: "1 when the last pass could read and use the contributions file.", ConstLabels: labels}),
		reached: prometheus.NewGauge(prometheus.GaugeOpts{Name: "provisioner_backend_reachable",
			Help: "1 when the server answered after the last pass.", ConstLabels: labels}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "provisioner_leader",
			Help: "1 while this replica holds the lease and acts, 0 while it stands by.", ConstLabels: labels}),
		mode: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "provisioner_mode",
			Help:        "1 for the mode the provider's role was last found in, in the backend's own words; 0 for each found before.",
			ConstLabels: labels}, []string{"role"}),
		halted: prometheus.NewGauge(prometheus.GaugeOpts{Name: "provisioner_extension_rollouts_halted",
			Help: "Extension rollouts halted because an update failed; each resumes on SIGHUP or when the server's versions change.", ConstLabels: labels}),
		rollout: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "provisioner_extension_rollout_consumers",
			Help: "Per extension rollout under way (key: extension vector -> 0.8.6): the consumers that hold the version (done) and " +
				"those it is for (total); halted is 1 while it is halted.",
			ConstLabels: labels}, []string{"key", "of"}),
	}
	m.reg.MustRegister(m.consumers, m.passes, m.creates, m.reapplies, m.withdrawals, m.drops, m.held, m.dropsHeld, m.archives, m.archiveFailures, m.archiveBytes, m.archiveSeconds, m.mass, m.failures, m.unchecked,
		m.duration, m.readable, m.reached, m.leader, m.mode, m.halted, m.rollout,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, s := range domain.States {
		m.consumers.WithLabelValues(string(s))
	}
	m.dropsHeld.WithLabelValues("archiving")
	m.dropsHeld.WithLabelValues("failed")
	b := version()
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "provisioner_build_info",
		Help: "1, labelled with the build's version (app.Release), the commit it was built from and its Go version.", ConstLabels: labels},
		[]string{"version", "commit", "goversion"})
	info.WithLabelValues(b.version, b.commit, b.goversion).Set(1)
	m.reg.MustRegister(info)
	return m
}

// Progress moves the counters by the calls of the pass under way that returned since it was
// last given: they move as calls return, not only when the pass settles.
func (m *Metrics) Progress(p domain.Progress) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p.Pass == m.observed && p.Pass != 0 {
		return // settled and counted
	}
	if p.Pass != m.counted.Pass {
		m.counted = domain.Progress{Pass: p.Pass}
	}
	m.countUpTo(p.Created, p.Reapplied, p.Withdrawn, p.Dropped, p.Failures)
}

// countUpTo adds to each counter what the pass under way has done beyond what it already
// counted of it (m.counted), and notes it counted. m.mu is held.
func (m *Metrics) countUpTo(created, reapplied, withdrawn, dropped, failures int) {
	c := &m.counted
	for _, x := range []struct {
		counter prometheus.Counter
		now     int
		known   *int
	}{{m.creates, created, &c.Created}, {m.reapplies, reapplied, &c.Reapplied}, {m.withdrawals, withdrawn, &c.Withdrawn},
		{m.drops, dropped, &c.Dropped}, {m.failures, failures, &c.Failures}} {
		if x.now > *x.known {
			x.counter.Add(float64(x.now - *x.known))
			*x.known = x.now
		}
	}
}

// Observe counts one pass (what Progress did not already count of it), and whether the server
// answered after it.
func (m *Metrics) Observe(r domain.Report, reached bool) {
	m.passes.Inc()
	m.mu.Lock()
	m.countUpTo(r.Created, r.Reapplied, r.Withdrawn, r.Dropped, r.Failures)
	m.observed, m.counted = m.counted.Pass, domain.Progress{}
	m.mu.Unlock()
	m.unchecked.Add(float64(r.CheckErrors)) // checks not made move nothing
	m.duration.Observe(r.Took.Seconds())
	m.readable.Set(boolean(r.FileRead))
	m.reached.Set(boolean(reached))
	if !r.FileRead {
		return // nothing read says nothing of the consumers: the last counts stand
	}
	m.rollout.Reset()
	halted := 0
	for _, ro := range r.Rollouts {
		m.rollout.WithLabelValues(ro.Key, "done").Set(float64(ro.Done))
		m.rollout.WithLabelValues(ro.Key, "total").Set(float64(ro.Total))
		m.rollout.WithLabelValues(ro.Key, "halted").Set(boolean(ro.Halted != ""))
		if ro.Halted != "" {
			halted++
		}
	}
	m.halted.Set(float64(halted))
	m.held.Set(float64(r.WithdrawalsHeld))
	archiving, failed := 0, 0
	for _, l := range r.Leaving {
		switch {
		case l.State == domain.LeavingArchiving:
			archiving++
		case l.State == domain.LeavingFailing && strings.HasPrefix(l.LastError, "drop held: "):
			failed++
		}
	}
	m.dropsHeld.WithLabelValues("archiving").Set(float64(archiving))
	m.dropsHeld.WithLabelValues("failed").Set(float64(failed))
	m.mass.Set(boolean(r.MassWithdrawal))
	counts := make(map[domain.State]int, len(domain.States))
	for _, s := range r.Consumers {
		counts[s]++
	}
	for _, s := range domain.States {
		m.consumers.WithLabelValues(string(s)).Set(float64(counts[s]))
	}
}

// Archived moves the archive counters to what the backend counts now.
func (m *Metrics) Archived(c ports.ArchiveCounts) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.archives.Add(float64(max(c.Made-m.archived.Made, 0)))
	m.archiveFailures.Add(float64(max(c.Failed-m.archived.Failed, 0)))
	m.archiveBytes.Add(float64(max(c.Bytes-m.archived.Bytes, 0)))
	m.archiveSeconds.Add(max(c.Seconds-m.archived.Seconds, 0))
	m.archived = c
}

// Handler serves the metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

func boolean(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Mode records the mode the provider's role was last found in, in the backend's words; "" before
// it was. A mode once seen stays a series, at 0 while another holds.
func (m *Metrics) Mode(mode string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mode != "" && !slices.Contains(m.modes, mode) {
		m.modes = append(m.modes, mode)
	}
	for _, seen := range m.modes {
		m.mode.WithLabelValues(seen).Set(boolean(seen == mode))
	}
}
