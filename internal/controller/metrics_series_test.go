package controller

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A DaemonSet's series are set all at once: a series no longer set is deleted, the
// others are kept or changed, another DaemonSet's are left alone, and forget deletes
// the DaemonSet's series.
func TestDSGaugesSet(t *testing.T) {
	g := newDSGauges(prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "test_nodes"}, []string{"namespace", "daemonset", "reason"}), 1)
	value := func(ds, reason string) float64 {
		return testutil.ToFloat64(g.vec.WithLabelValues("ns", ds, reason))
	}
	g.set("ns", "other", map[seriesLabels]float64{{"Starting"}: 7})
	g.set("ns", "agent", map[seriesLabels]float64{{"Starting"}: 2, {"Failing"}: 1})
	g.set("ns", "agent", map[seriesLabels]float64{{"Starting"}: 3})
	if n := testutil.CollectAndCount(g.vec); n != 2 {
		t.Fatalf("%d series, want 2: agent's Failing deleted", n)
	}
	if value("agent", "Starting") != 3 || value("other", "Starting") != 7 {
		t.Errorf("agent Starting %v, other Starting %v; want 3 and 7", value("agent", "Starting"), value("other", "Starting"))
	}
	g.set("ns", "agent", nil)
	if n := testutil.CollectAndCount(g.vec); n != 1 {
		t.Errorf("%d series after agent's were set to none, want other's alone", n)
	}
	g.set("ns", "agent", map[seriesLabels]float64{{"Failing"}: 4})
	g.forget("ns", "agent")
	g.forget("ns", "other")
	if n := testutil.CollectAndCount(g.vec); n != 0 {
		t.Errorf("%d series after both were forgotten, want none", n)
	}
}
