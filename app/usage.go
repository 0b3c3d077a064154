package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

// usage is the last read of every listed consumer's usage: when it was made (at), and when a
// read was last tried, which may have failed.
type usage struct {
	at, tried time.Time
	by        map[string]ports.Usage
}

// usageDoc is one consumer's usage in /status, as last read.
type usageDoc struct {
	DatabaseBytes int64     `json:"database_bytes"`
	Connections   int       `json:"connections"`
	ReadAt        time.Time `json:"read_at"`
}

// usageOf is the usage of each of the listed consumers, by login, as last read; nil before a read.
func (d *daemon) usageOf(status []*domain.Status) map[string]usageDoc {
	u := d.usage.Load()
	if u == nil || u.by == nil {
		return nil
	}
	out := make(map[string]usageDoc, len(status))
	for _, s := range status {
		if x, ok := u.by[s.As]; ok {
			out[s.As] = usageDoc{DatabaseBytes: x.DatabaseBytes, Connections: x.Connections, ReadAt: u.at}
		}
	}
	return out
}

// usageDue pokes readUsage after a pass that found the server usable and acted, where a read
// is due: reads follow a pass so that they ask only a server a pass just used (never a standby,
// never one down, which the pass says once), and none is made while it is not.
func (d *daemon) usageDue(r domain.Report) {
	if d.cfg.UsageEvery <= 0 || r.ServerProblem != "" || r.Standby || r.Status == nil {
		return
	}
	if u := d.usage.Load(); u != nil && time.Since(u.tried) < d.cfg.UsageEvery {
		return
	}
	select {
	case d.readNow <- r.Status:
	default: // a read under way (or readUsage not yet waiting): the next pass pokes again
	}
}

// readUsage reads the usage of the consumers each poke lists, until ctx ends. A read that fails
// is said once until one succeeds again: the last read stays what /status shows.
func (d *daemon) readUsage(ctx context.Context, from ports.UsageReader) {
	failing := ""
	for {
		var status []*domain.Status
		select {
		case <-ctx.Done():
			return
		case status = <-d.readNow:
		}
		logins := make([]string, len(status))
		for i, s := range status {
			logins[i] = s.As
		}
		rctx, cancel := context.WithTimeout(ctx, d.cfg.HoldsTimeout)
		by, err := from.Usage(rctx, logins)
		cancel()
		if err != nil {
			if text := err.Error(); text != failing && ctx.Err() == nil {
				failing = text
				d.log.Log(ports.Entry{Level: slog.LevelWarn, Message: fmt.Sprintf("could not read the consumers' usage: %s; "+
					"/status shows the last read", text)})
			}
			last := usage{}
			if u := d.usage.Load(); u != nil {
				last = *u
			}
			last.tried = time.Now() // the next read is due in --usage-every
			d.usage.Store(&last)
			continue
		}
		failing = ""
		now := time.Now()
		d.usage.Store(&usage{at: now, tried: now, by: by})
		d.metrics.Usage(by)
	}
}

// perConsumer are the usage gauges of --metrics-per-consumer: a series per consumer.
type perConsumer struct {
	bytes, connections *prometheus.GaugeVec
}

// PerConsumer adds each consumer's usage to the metrics, as Usage gives it: a series per
// consumer, which is why it is asked for (--metrics-per-consumer).
func (m *Metrics) PerConsumer(resource string) {
	labels := prometheus.Labels{"resource": resource}
	m.per = &perConsumer{
		bytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "provisioner_consumer_database_bytes",
			Help: "The size of each consumer's database, as last read (--usage-every).", ConstLabels: labels}, []string{"consumer"}),
		connections: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "provisioner_consumer_connections",
			Help: "Each consumer's sessions on the server, as last read (--usage-every).", ConstLabels: labels}, []string{"consumer"}),
	}
	m.reg.MustRegister(m.per.bytes, m.per.connections)
}

// Usage sets each consumer's usage where PerConsumer asked for it; a consumer no longer read
// loses its series.
func (m *Metrics) Usage(by map[string]ports.Usage) {
	if m.per == nil {
		return
	}
	m.per.bytes.Reset()
	m.per.connections.Reset()
	for as, u := range by {
		m.per.bytes.WithLabelValues(as).Set(float64(u.DatabaseBytes))
		m.per.connections.WithLabelValues(as).Set(float64(u.Connections))
	}
}
