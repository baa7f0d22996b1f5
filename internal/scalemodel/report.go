package scalemodel

import (
	"fmt"
	"io"
	"strings"
)

// Table writes the results as a markdown table, one column per size, and the ratio
// of the largest size to the smallest for the per-node and per-event measures.
func Table(w io.Writer, results []Result) {
	if len(results) == 0 {
		return
	}
	first, last := results[0], results[len(results)-1]
	head := []string{"measure"}
	sep := []string{"---"}
	for _, r := range results {
		head = append(head, fmt.Sprintf("%d nodes", r.Nodes))
		sep = append(sep, "---:")
	}
	head = append(head, fmt.Sprintf("%d ÷ %d", last.Nodes, first.Nodes))
	sep = append(sep, "---:")
	fmt.Fprintf(w, "| %s |\n| %s |\n", strings.Join(head, " | "), strings.Join(sep, " | "))
	row := func(name, format string, ratio bool, value func(Result) float64) {
		cells := []string{name}
		for _, r := range results {
			cells = append(cells, fmt.Sprintf(format, value(r)))
		}
		if ratio && value(first) > 0 {
			cells = append(cells, fmt.Sprintf("%.2f", value(last)/value(first)))
		} else {
			cells = append(cells, "–")
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	row("pods", "%.0f", false, func(r Result) float64 { return float64(r.Pods) })
	row("cold create: converge (s)", "%.1f", false, func(r Result) float64 { return r.CreateSeconds })
	row("cold create: CPU (s)", "%.1f", false, func(r Result) float64 { return r.CreateCPUSeconds })
	row("cold create: CPU per pod (ms)", "%.3f", true, func(r Result) float64 { return perPod(r.CreateCPUSeconds, r.Pods) })
	row("rollout: converge (s)", "%.1f", false, func(r Result) float64 { return r.RolloutSeconds })
	row("rollout: CPU (s)", "%.1f", false, func(r Result) float64 { return r.RolloutCPUSeconds })
	row("rollout: CPU per pod (ms)", "%.3f", true, func(r Result) float64 { return perPod(r.RolloutCPUSeconds, r.Pods) })
	row("churn: pool moves", "%.0f", false, func(r Result) float64 { return float64(r.ChurnMoves) })
	row("churn: settled after first move (s)", "%.1f", false, func(r Result) float64 { return r.ChurnSeconds })
	row("churn: CPU per node event (ms)", "%.3f", true, func(r Result) float64 { return r.ChurnCPUPerMoveMs })
	row("controller live heap (MiB)", "%.0f", false, func(r Result) float64 { return float64(r.ControllerHeapBytes) / (1 << 20) })
	row("controller live heap per node (KiB)", "%.1f", true, func(r Result) float64 { return r.HeapPerNodeKiB })
	row("process peak RSS (MiB)", "%.0f", false, func(r Result) float64 { return float64(r.ProcessPeakRSSBytes) / (1 << 20) })
}

func perPod(cpuSeconds float64, pods int) float64 {
	if pods == 0 {
		return 0
	}
	return cpuSeconds * 1000 / float64(pods)
}
