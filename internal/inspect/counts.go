package inspect

import (
	"maps"
	"slices"

	"github.com/everynode/everynode/internal/daemon"
)

// Counts are nodes that should run the DaemonSet's pod, and how many of them run a
// pod of the current revision, and an available one.
type Counts struct {
	Wave                      string // the wave's label value, for Waves
	Nodes, Updated, Available int
}

// Count totals the nodes of a report.
func Count(r daemon.Report) Counts {
	var c Counts
	for _, n := range r.Nodes {
		c.add(n)
	}
	return c
}

func (c *Counts) add(n daemon.NodeReport) {
	if !n.Verdict.Run {
		return
	}
	c.Nodes++
	updated, available := false, false
	for _, p := range n.Pods {
		if p.Updated && !p.Deleting {
			updated = true
			available = available || p.Available
		}
	}
	if updated {
		c.Updated++
	}
	if available {
		c.Available++
	}
}

// Waves counts the nodes of each wave, in the order the rollout takes them: the
// values of wave-order first, then the others sorted, then the nodes without the
// label.
func Waves(r daemon.Report) []Counts {
	byWave := map[string]*Counts{}
	for _, n := range r.Nodes {
		if !n.Verdict.Run {
			continue
		}
		c := byWave[n.Wave]
		if c == nil {
			c = &Counts{Wave: n.Wave}
			byWave[n.Wave] = c
		}
		c.add(n)
	}
	var out []Counts
	for _, w := range daemon.OrderWaves(slices.Collect(maps.Keys(byWave)), r.Policy.WaveOrder) {
		out = append(out, *byWave[w])
	}
	return out
}
