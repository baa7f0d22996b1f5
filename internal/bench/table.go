package bench

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Unit says how a Metric's value reads and prints.
type Unit int

const (
	// Seconds of wall-clock time.
	Seconds Unit = iota
	// CPUSeconds of CPU time.
	CPUSeconds
	// Bytes, printed in MiB.
	Bytes
	// Count of things.
	Count
	// Millis of time (wall-clock or CPU, as the name says).
	Millis
	// PerSecond is a rate.
	PerSecond
	// Factor is a dimensionless multiple.
	Factor
)

// Metric is one measured value of one run.
type Metric struct {
	Name  string
	Unit  Unit
	Value float64
	// OmitIfZero drops the metric's row when it is zero (or missing) in every run.
	OmitIfZero bool
	// NoRatio marks a metric whose ratio between the controllers means nothing (a
	// property of the sandbox, not of the controller).
	NoRatio bool
}

// RunMetrics is what one controller measured in one scenario.
type RunMetrics struct {
	Controller string
	Metrics    []Metric
	// Err, when set, is why the run did not finish; Metrics hold what was measured
	// until then.
	Err error
	// Skipped marks a controller the scenario does not run (the floor controller
	// outside the churn scenario): its cells are empty, and no failure.
	Skipped bool
}

func (r RunMetrics) metric(name string) (Metric, bool) {
	for _, m := range r.Metrics {
		if m.Name == name {
			return m, true
		}
	}
	return Metric{}, false
}

// Result is one scenario's runs, one per controller, in column order.
type Result struct {
	Scenario string
	Runs     []RunMetrics
}

// Table is the benchmark's output: one row per scenario and metric, one column per
// controller, and the ratios (see ratios).
type Table struct {
	Controllers []string // column order
	Results     []Result
}

// ratio is a ratio column: the values of column num over those of column den.
type ratio struct{ num, den int }

// ratios are the table's ratio columns: the second of the compared controllers over
// the first (everynode/upstream when both run), then everynode over the floor
// controller when both run.
func (t Table) ratios() []ratio {
	var out []ratio
	var compared []int
	floor, every := -1, -1
	for i, c := range t.Controllers {
		switch c {
		case Floor:
			floor = i
		case EveryNode:
			every = i
		}
		if c != Floor {
			compared = append(compared, i)
		}
	}
	if len(compared) == 2 {
		out = append(out, ratio{num: compared[1], den: compared[0]})
	}
	if floor >= 0 && every >= 0 {
		out = append(out, ratio{num: every, den: floor})
	}
	return out
}

// Ratio is b/a, and whether it is defined: both measured and finite, and a non-zero.
func Ratio(a, b float64) (float64, bool) {
	if math.IsNaN(a) || math.IsNaN(b) || math.IsInf(a, 0) || math.IsInf(b, 0) || a == 0 {
		return 0, false
	}
	return b / a, true
}

// Markdown renders the table as a GitHub-flavoured markdown table, followed by a
// line per failed run.
func (t Table) Markdown() string {
	var sb strings.Builder
	header := []string{"scenario", "measure"}
	header = append(header, t.Controllers...)
	ratios := t.ratios()
	for _, r := range ratios {
		header = append(header, t.Controllers[r.num]+"/"+t.Controllers[r.den])
	}
	writeRow(&sb, header)
	align := []string{"---", "---"}
	for range header[2:] {
		align = append(align, "---:")
	}
	writeRow(&sb, align)
	var failures []string
	for _, res := range t.Results {
		runs := make([]RunMetrics, len(t.Controllers))
		for i, c := range t.Controllers {
			runs[i] = RunMetrics{Controller: c, Err: fmt.Errorf("not run")}
			for _, r := range res.Runs {
				if r.Controller == c {
					runs[i] = r
				}
			}
		}
		for _, r := range runs {
			if r.Err != nil && !r.Skipped {
				failures = append(failures, fmt.Sprintf("%s, %s: %v", res.Scenario, r.Controller, r.Err))
			}
		}
		label := res.Scenario
		for _, name := range metricNames(runs) {
			cells := []string{label, ""}
			values := make([]float64, len(runs))
			var unit Unit
			noRatio, omit, allZero := false, false, true
			for i, r := range runs {
				values[i] = math.NaN()
				if m, ok := r.metric(name); ok {
					values[i], unit = m.Value, m.Unit
					noRatio = noRatio || m.NoRatio
					omit = omit || m.OmitIfZero
					if m.Value != 0 && !math.IsNaN(m.Value) {
						allZero = false
					}
				}
			}
			if omit && allZero {
				continue
			}
			cells[1] = name
			for i, v := range values {
				cell := Format(unit, v)
				if math.IsNaN(v) && runs[i].Err != nil && !runs[i].Skipped {
					cell = "failed"
				}
				cells = append(cells, cell)
			}
			for _, rc := range ratios {
				cell := "–"
				if r, ok := Ratio(values[rc.den], values[rc.num]); ok && !noRatio {
					cell = strconv.FormatFloat(r, 'f', 2, 64)
				}
				cells = append(cells, cell)
			}
			writeRow(&sb, cells)
			label = ""
		}
	}
	for _, f := range failures {
		fmt.Fprintf(&sb, "\nFAILED: %s\n", f)
	}
	return sb.String()
}

// metricNames are the names the runs measured: the first run's order, then any the
// others add.
func metricNames(runs []RunMetrics) []string {
	seen := map[string]bool{}
	var names []string
	for _, r := range runs {
		for _, m := range r.Metrics {
			if !seen[m.Name] {
				seen[m.Name] = true
				names = append(names, m.Name)
			}
		}
	}
	return names
}

func writeRow(sb *strings.Builder, cells []string) {
	sb.WriteString("| ")
	sb.WriteString(strings.Join(cells, " | "))
	sb.WriteString(" |\n")
}

// Format prints a value in its unit; a missing (NaN) value prints as "–", an
// infinite one (never reached) as "∞".
func Format(u Unit, v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	if math.IsInf(v, 1) {
		return "∞"
	}
	switch u {
	case Seconds, Millis:
		if math.Abs(v) < 10 {
			return strconv.FormatFloat(v, 'f', 2, 64)
		}
		if math.Abs(v) < 1000 {
			return strconv.FormatFloat(v, 'f', 1, 64)
		}
		return thousands(int64(math.Round(v)))
	case CPUSeconds:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case Bytes:
		mib := v / (1 << 20)
		if math.Abs(mib) < 10 {
			return strconv.FormatFloat(mib, 'f', 1, 64)
		}
		return thousands(int64(math.Round(mib)))
	case Count, PerSecond:
		return thousands(int64(math.Round(v)))
	case Factor:
		return strconv.FormatFloat(v, 'f', 1, 64) + "×"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// thousands prints n with a comma between groups of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var out []byte
	for i, c := range []byte(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, c)
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
