package controller

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// dsGauges is a GaugeVec labelled by namespace, daemonset and up to two labels more,
// whose series of one DaemonSet are set all at once (set). It keeps what each
// DaemonSet's series were last set to, so that a sync that changes none of them
// touches none, and one that drops a series deletes that series alone.
type dsGauges struct {
	vec   *prometheus.GaugeVec
	extra int // the labels after namespace and daemonset
	mu    sync.Mutex
	last  map[dsName]map[seriesLabels]float64
}

type dsName struct{ namespace, name string }

// seriesLabels are a series' label values after namespace and daemonset.
type seriesLabels [2]string

func newDSGauges(vec *prometheus.GaugeVec, extra int) *dsGauges {
	return &dsGauges{vec: vec, extra: extra, last: map[dsName]map[seriesLabels]float64{}}
}

func (g *dsGauges) labels(ds dsName, s seriesLabels) []string {
	return append([]string{ds.namespace, ds.name}, s[:g.extra]...)
}

// set makes the DaemonSet's series exactly next.
func (g *dsGauges) set(namespace, name string, next map[seriesLabels]float64) {
	ds := dsName{namespace, name}
	g.mu.Lock()
	defer g.mu.Unlock()
	prev := g.last[ds]
	for s := range prev {
		if _, ok := next[s]; !ok {
			g.vec.DeleteLabelValues(g.labels(ds, s)...)
		}
	}
	for s, v := range next {
		if was, ok := prev[s]; !ok || was != v {
			g.vec.WithLabelValues(g.labels(ds, s)...).Set(v)
		}
	}
	if len(next) == 0 {
		delete(g.last, ds)
	} else {
		g.last[ds] = next
	}
}

// forget deletes the DaemonSet's series.
func (g *dsGauges) forget(namespace, name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.vec.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "daemonset": name})
	delete(g.last, dsName{namespace, name})
}
