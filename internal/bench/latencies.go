package bench

import (
	"math"
	"sort"
	"time"
)

// latencies are, per node, the time from an event (the node created) to a
// milestone (its CNI pod created, say). Nodes that never reached the milestone
// while the benchmark waited are counted, not dropped: they rank last, as +Inf.
type latencies struct {
	reached []time.Duration
	missing int
}

// add records one node: from is its event, at when it reached the milestone, ok
// whether it did.
func (l *latencies) add(from, at time.Time, ok bool) {
	if !ok {
		l.missing++
		return
	}
	l.reached = append(l.reached, at.Sub(from))
}

// seconds is the nearest-rank p-th percentile (0 < p <= 100) over every node, in
// seconds: +Inf when it falls among the nodes that never reached the milestone, NaN
// when there are no nodes.
func (l latencies) seconds(p float64) float64 {
	n := len(l.reached) + l.missing
	if n == 0 {
		return math.NaN()
	}
	rank := int(math.Ceil(p/100*float64(n))) - 1
	rank = max(0, min(rank, n-1))
	if rank >= len(l.reached) {
		return math.Inf(1)
	}
	s := append([]time.Duration(nil), l.reached...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[rank].Seconds()
}
