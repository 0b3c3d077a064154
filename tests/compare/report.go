package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// report is every table of the run, as markdown with padded columns, which reads as well in a
// terminal as rendered.
func (b *bench) report() string {
	var out strings.Builder
	main := &table{head: []string{"workload", "N", "raw floor", "raw P", "provisioner", "--parallel", "prov/raw", "target", "verdict"}}
	rounds := &table{head: []string{"workload", "raw rounds", "provisioner rounds"}}
	cpu := &table{head: []string{"workload", "raw: client CPU", "raw: machine CPU", "prov: its CPU", "prov: machine CPU"}}
	for _, r := range b.results {
		rawMed, provMed := median(walls(r.raw)), median(walls(r.prov))
		rawCell, pCell, ratioCell, verdict := "—", "—", "—", "—"
		if len(r.raw) > 0 {
			rawCell, pCell = dur(rawMed), strconv.Itoa(r.rawP)
			ratioCell = fmt.Sprintf("%.2fx", ratio(provMed, rawMed))
		}
		switch {
		case r.maxRatio > 0 && ratio(provMed, rawMed) <= r.maxRatio:
			verdict = "met"
		case r.maxRatio > 0:
			verdict = "MISSED"
		case r.maxWall > 0 && provMed < r.maxWall:
			verdict = "met"
		case r.maxWall > 0:
			verdict = "MISSED"
		}
		if r.note != "" {
			verdict += " (" + r.note + ")"
		}
		main.add(r.workload, strconv.Itoa(r.n), rawCell, pCell, dur(provMed), strconv.Itoa(r.provP), ratioCell, r.target, verdict)
		rounds.add(r.workload, list(walls(r.raw)), list(walls(r.prov)))
		if len(r.raw) > 0 {
			cpu.add(r.workload, dur(median(clients(r.raw))), dur(median(machines(r.raw))),
				dur(median(clients(r.prov))), dur(median(machines(r.prov))))
		}
	}
	fmt.Fprintf(&out, "## Results (medians of %d interleaved rounds)\n\n%s\n", b.opts.rounds, main.markdown())
	fmt.Fprintf(&out, "The raw floor runs from this process on P connections of its own, connecting included; the provisioner's "+
		"time is its process's, start to exit 0. raw P is the fastest parallelism of the sweep below.\n\n")
	fmt.Fprintf(&out, "### Every round\n\n%s\n", rounds.markdown())
	fmt.Fprintf(&out, "### CPU (medians; machine CPU is the whole machine's busy time over the run: server, client and "+
		"anything else)\n\n%s\n", cpu.markdown())
	if len(b.sweeps) > 0 {
		fmt.Fprintf(&out, "## Parallelism sweep (median of %d round(s) each; * fastest of its column)\n\n%s\n",
			b.opts.sweepRounds, b.sweepTable().markdown())
	}
	if len(b.counts) > 0 {
		fmt.Fprintf(&out, "## Statements and connections per consumer (first main round; the provisioner's role "+
			"transaction, BEGIN excepted, turns the server's statement logging off, so it is neither counted nor timed here)\n\n%s\n",
			b.countTable().markdown())
		for _, c := range b.counts {
			kinds := &table{head: []string{"statement (by server time)", "per consumer", "server time per consumer"}}
			for _, k := range c.topKinds() {
				kc := c.kinds[k]
				kinds.add("`"+strings.ReplaceAll(k, "|", `\|`)+"`", fmt.Sprintf("%.2f", float64(kc.n)/float64(c.n)),
					dur(kc.took/time.Duration(c.n)))
			}
			fmt.Fprintf(&out, "### %s, %s\n\n%s\n", c.workload, c.side, kinds.markdown())
		}
	}
	return out.String()
}

func (b *bench) sweepTable() *table {
	t := &table{head: []string{"P"}}
	for _, s := range b.sweeps {
		t.head = append(t.head, s.workload+" raw", s.workload+" prov")
	}
	best := func(m map[int][]measure) int {
		p := b.opts.sweep[0]
		for _, q := range b.opts.sweep {
			if median(walls(m[q])) < median(walls(m[p])) {
				p = q
			}
		}
		return p
	}
	for _, p := range b.opts.sweep {
		row := []string{strconv.Itoa(p)}
		for _, s := range b.sweeps {
			for _, m := range []map[int][]measure{s.raw, s.prov} {
				cell := dur(median(walls(m[p])))
				if best(m) == p {
					cell += " *"
				}
				row = append(row, cell)
			}
		}
		t.add(row...)
	}
	return t
}

func (b *bench) countTable() *table {
	t := &table{head: []string{"workload", "side", "statements logged", "their server time", "connections", "checkpoints (in all)"}}
	for _, c := range b.counts {
		t.add(c.workload, c.side, fmt.Sprintf("%.2f", float64(c.statements)/float64(c.n)), dur(c.took/time.Duration(c.n)),
			fmt.Sprintf("%.3f", float64(c.connections)/float64(c.n)), fmt.Sprint(c.checkpoints))
	}
	return t
}

type table struct {
	head []string
	rows [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) markdown() string {
	width := make([]int, len(t.head))
	for _, row := range append([][]string{t.head}, t.rows...) {
		for i, cell := range row {
			width[i] = max(width[i], len([]rune(cell)))
		}
	}
	var sb strings.Builder
	line := func(cells []string) {
		sb.WriteString("|")
		for i, cell := range cells {
			sb.WriteString(" " + cell + strings.Repeat(" ", width[i]-len([]rune(cell))) + " |")
		}
		sb.WriteString("\n")
	}
	line(t.head)
	rule := make([]string, len(t.head))
	for i := range rule {
		rule[i] = strings.Repeat("-", width[i])
	}
	line(rule)
	for _, row := range t.rows {
		line(row)
	}
	return sb.String()
}

func walls(ms []measure) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		out[i] = m.wall
	}
	return out
}

func clients(ms []measure) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		out[i] = m.client
	}
	return out
}

func machines(ms []measure) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		out[i] = m.machine
	}
	return out
}

// median of ds; of an even count, the mean of the middle two; 0 of none.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	xs := append([]time.Duration(nil), ds...)
	sort.Slice(xs, func(i, j int) bool { return xs[i] < xs[j] })
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func list(ds []time.Duration) string {
	if len(ds) == 0 {
		return "—"
	}
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = dur(d)
	}
	return strings.Join(parts, ", ")
}

// dur is a duration at a precision that suits it.
func dur(d time.Duration) string {
	switch {
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}
