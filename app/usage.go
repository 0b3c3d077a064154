package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

// usageReader is what the daemon asks the backend of each consumer's usage (postgres.Backend).
type usageReader interface {
	// Usage is what each of the logins that has a role takes of the server, in one query.
	Usage(ctx context.Context, logins []string) (map[string]postgres.Usage, error)
}

var _ usageReader = (*postgres.Backend)(nil)

// usage is the last read of every listed consumer's usage.
type usage struct {
	at time.Time
	by map[string]postgres.Usage
}

// usageDoc is one consumer's usage in /status, as last read.
type usageDoc struct {
	DatabaseBytes int64     `json:"database_bytes"`
	Connections   int       `json:"connections"`
	ReadAt        time.Time `json:"read_at"`
}

// usageOf is the usage of each of the listed consumers, by login, as last read; nil before a read.
func (d *daemon) usageOf(status []domain.Status) map[string]usageDoc {
	u := d.usage.Load()
	if u == nil {
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

// readUsage reads every listed consumer's usage every --usage-every, the first once a pass has
// listed them, until ctx ends. A read that fails is said once until one succeeds again: the
// last read stays what /status shows.
func (d *daemon) readUsage(ctx context.Context, from usageReader) {
	if d.cfg.UsageEvery <= 0 || from == nil {
		return
	}
	wait := time.Second // until a pass has listed the consumers
	failing := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		r := d.last.Load()
		if r == nil || r.Status == nil || r.Standby {
			wait = time.Second
			continue
		}
		wait = d.cfg.UsageEvery
		logins := make([]string, len(r.Status))
		for i, s := range r.Status {
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
			continue
		}
		failing = ""
		d.usage.Store(&usage{at: time.Now(), by: by})
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
func (m *Metrics) Usage(by map[string]postgres.Usage) {
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
