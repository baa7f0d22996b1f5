package bench

import (
	"fmt"
	"math"
	"slices"
)

// Rounds (--rounds) run every scenario more than once per controller. Each run has
// a fresh sandbox, and on a small machine sandboxes differ in speed from one run to
// the next by as much as the controllers differ: one run per controller can put a
// ratio anywhere in that spread. The median of a few runs, the controllers taking
// turns at going first, is steadier.

// roundOrder is the order the controllers run in during round (counted from 1): as
// given in odd rounds and reversed in even ones, so that no controller always runs
// on the machine as the earlier runs left it.
func roundOrder(controllers []string, round int) []string {
	if round%2 == 1 {
		return controllers
	}
	out := slices.Clone(controllers)
	slices.Reverse(out)
	return out
}

// runNames name one run of a scenario: tag its directory and profiles, label its
// progress lines, title its entry in the closing list of run times. The round is
// named only when there are several.
func runNames(scenario, ctrl string, round, rounds int) (tag, label, title string) {
	tag, label, title = scenario+"-"+ctrl, ctrl, scenario+"/"+ctrl
	if rounds > 1 {
		tag += fmt.Sprintf("-round%d", round)
		label += fmt.Sprintf(", round %d", round)
		title += fmt.Sprintf(" (round %d)", round)
	}
	return tag, label, title
}

// medianRun is what the table shows for one controller's runs of a scenario, in
// round order: each metric's median over the runs that finished, and the first
// failure if a run failed. A single run is shown as it is. When no run finished,
// the first run's partial metrics are shown with its failure.
func medianRun(runs []RunMetrics) RunMetrics {
	if len(runs) == 1 {
		return runs[0]
	}
	out := RunMetrics{Controller: runs[0].Controller}
	var finished []RunMetrics
	for i, r := range runs {
		if r.Err == nil {
			finished = append(finished, r)
		} else if out.Err == nil {
			out.Err = fmt.Errorf("round %d: %w", i+1, r.Err)
		}
	}
	if len(finished) == 0 {
		out.Metrics = runs[0].Metrics
		return out
	}
	for _, name := range metricNames(finished) {
		var values []float64
		var kept Metric
		for _, r := range finished {
			if m, ok := r.metric(name); ok && !math.IsNaN(m.Value) {
				values = append(values, m.Value)
				kept = m
			}
		}
		if len(values) == 0 {
			continue
		}
		kept.Value = median(values)
		out.Metrics = append(out.Metrics, kept)
	}
	return out
}

// median is the middle value of values (not empty), or the mean of the middle two;
// +Inf (a latency never reached) sorts last.
func median(values []float64) float64 {
	s := slices.Clone(values)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
