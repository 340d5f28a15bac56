package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sema-agent/sema/bench"
)

// table is a header and rows of cells, printed aligned or as markdown.
type table struct {
	head []string
	rows [][]string
}

func (t *table) print(w io.Writer, markdown bool) {
	if markdown {
		fmt.Fprintln(w, "| "+strings.Join(t.head, " | ")+" |")
		fmt.Fprintln(w, "|"+strings.Repeat("---|", len(t.head)))
		for _, r := range t.rows {
			fmt.Fprintln(w, "| "+strings.Join(r, " | ")+" |")
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.head, "\t"))
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}

// cell shows one side: MB/s and seconds for throughput, the median and
// p99 for round trips, or why it failed.
func cell(row bench.UserRow, size int64, r bench.Result) string {
	if r.Err != nil {
		if r.Time > 0 {
			return fmt.Sprintf("failed after %.2f s: %s", r.Time.Seconds(), clip(r.Err.Error(), 110))
		}
		return "failed: " + clip(r.Err.Error(), 110)
	}
	if row.Bytes {
		return fmt.Sprintf("%.0f MB/s (%.2f s)", float64(size)/r.Time.Seconds()/1e6, r.Time.Seconds())
	}
	return fmt.Sprintf("%s (p99 %s)", ms(r.Time), ms(r.P99))
}

// ratio is baseline time / lane time: above 1, the lane is faster.
func ratio(m bench.Measure) (float64, bool) {
	if m.Lane.Err != nil || m.Base.Err != nil || m.Lane.Time <= 0 {
		return 0, false
	}
	return float64(m.Base.Time) / float64(m.Lane.Time), true
}

func goal(row bench.UserRow, r float64, ok bool) string {
	switch {
	case row.Goal == 0:
		return "—"
	case !ok:
		return "not measured"
	case r >= row.Goal:
		return "met"
	}
	return "not met"
}

func ratioCell(r float64, ok bool) string {
	if !ok {
		return "—"
	}
	return fmt.Sprintf("%.2f×", r)
}

var userHead = []string{"#", "work (N = %s)", "lane, the user's path", "baseline", "ratio (baseline/lane)", "goal ≥ 2×", "lane cpu s/GiB", "baseline cpu s/GiB"}

func header(size int64) []string {
	h := slices.Clone(userHead)
	h[1] = fmt.Sprintf(h[1], bench.FormatSize(size))
	return h
}

// cpuCell is a side's CPU-seconds per GiB by process, for a throughput
// row that succeeded.
func cpuCell(row bench.UserRow, size int64, r bench.Result) string {
	if !row.Bytes || r.Err != nil || len(r.CPU) == 0 {
		return "—"
	}
	return r.CPU.PerGiB(size)
}

// roundTable is one round's measurements.
func roundTable(entries []entry, size int64, ms []bench.Measure) *table {
	t := &table{head: header(size)}
	for i, en := range entries {
		row := en.row
		r, ok := ratio(ms[i])
		t.rows = append(t.rows, []string{en.id(), en.work() + " vs " + row.Baseline, cell(row, size, ms[i].Lane), cell(row, size, ms[i].Base), ratioCell(r, ok), goal(row, r, ok),
			cpuCell(row, size, ms[i].Lane), cpuCell(row, size, ms[i].Base)})
	}
	return t
}

// notes are what each row checked, where the CPU went, and the server's
// memory.
func notes(w io.Writer, entries []entry, size int64, ms []bench.Measure) {
	for i, en := range entries {
		m := ms[i]
		line := fmt.Sprintf("  %s: %s", en.id(), m.Note)
		if len(m.Lane.CPU) > 0 {
			line += "; lane cpu: " + m.Lane.CPU.String()
		}
		if len(m.Base.CPU) > 0 {
			line += "; ssh cpu: " + m.Base.CPU.String()
		}
		if m.Lane.RSSPeak > 0 {
			line += fmt.Sprintf("; sema server VmRSS idle %s, peak %s", mib(m.Lane.RSSIdle), mib(m.Lane.RSSPeak))
		}
		fmt.Fprintln(w, line)
	}
}

// medianTable: per row, the median time of each side over the rounds that
// succeeded (with the range), and the median of the rounds' ratios; the
// CPU is the median round's.
func medianTable(entries []entry, size int64, rounds [][]bench.Measure) *table {
	t := &table{head: header(size)}
	for i, en := range entries {
		row := en.row
		var lane, base []bench.Result
		var ratios []float64
		for _, ms := range rounds {
			lane, base = append(lane, ms[i].Lane), append(base, ms[i].Base)
			if r, ok := ratio(ms[i]); ok {
				ratios = append(ratios, r)
			}
		}
		rc, g := "—", goal(row, 0, false)
		if len(ratios) > 0 {
			slices.Sort(ratios)
			r := ratios[len(ratios)/2]
			rc = fmt.Sprintf("%.2f× (%.2f–%.2f)", r, ratios[0], ratios[len(ratios)-1])
			g = goal(row, r, true)
		}
		t.rows = append(t.rows, []string{en.id(), en.work() + " vs " + row.Baseline, medianCell(row, size, lane), medianCell(row, size, base), rc, g,
			cpuCell(row, size, median(lane)), cpuCell(row, size, median(base))})
	}
	return t
}

// median is the result of median time among those that succeeded (the
// first when none did).
func median(rs []bench.Result) bench.Result {
	var ok []bench.Result
	for _, r := range rs {
		if r.Err == nil {
			ok = append(ok, r)
		}
	}
	if len(ok) == 0 {
		return rs[0]
	}
	slices.SortFunc(ok, func(a, b bench.Result) int { return int(a.Time - b.Time) })
	return ok[len(ok)/2]
}

func medianCell(row bench.UserRow, size int64, rs []bench.Result) string {
	var ok []bench.Result
	for _, r := range rs {
		if r.Err == nil {
			ok = append(ok, r)
		}
	}
	if len(ok) == 0 {
		return cell(row, size, rs[0])
	}
	slices.SortFunc(ok, func(a, b bench.Result) int { return int(a.Time - b.Time) })
	s := cell(row, size, ok[len(ok)/2])
	if len(ok) > 1 && row.Bytes {
		lo, hi := float64(size)/ok[len(ok)-1].Time.Seconds()/1e6, float64(size)/ok[0].Time.Seconds()/1e6
		s = fmt.Sprintf("%.0f MB/s (%.0f–%.0f)", float64(size)/ok[len(ok)/2].Time.Seconds()/1e6, lo, hi)
	}
	if len(ok) < len(rs) {
		s += fmt.Sprintf(", %d of %d failed", len(rs)-len(ok), len(rs))
	}
	return s
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "|", "/")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }
