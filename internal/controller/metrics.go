package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	apps "k8s.io/api/apps/v1"
)

// Metrics are the controller's Prometheus metrics. They live in the registry given to
// NewMetrics, never in a global one.
type Metrics struct {
	reg          prometheus.Registerer
	syncDuration *prometheus.HistogramVec
	podsCreated  *prometheus.CounterVec
	podsDeleted  *prometheus.CounterVec
	failedPods   prometheus.Counter
	decisions    *prometheus.CounterVec
	desired      *prometheus.GaugeVec
	updated      *prometheus.GaugeVec
	available    *prometheus.GaugeVec
	queueDepth   func() int
}

// NewMetrics creates the metrics and registers them with reg.
// WithFence adds everynode_fenced_writes_total, the writes fence held back, to the
// registry the metrics were made for, and returns m.
func (m *Metrics) WithFence(fence *Fence) *Metrics {
	if m.reg != nil {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "everynode_fenced_writes_total",
			Help: "Writes held back because this replica was not sure it still held the leader election Lease.",
		}, func() float64 { return float64(fence.HeldBack()) }))
	}
	return m
}

func NewMetrics(reg prometheus.Registerer) *Metrics {
	dsLabels := []string{"namespace", "daemonset"}
	m := &Metrics{
		syncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "everynode_sync_duration_seconds",
			Help:    "Time to sync one DaemonSet: read the caches, decide, and apply the plan.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"result"}),
		podsCreated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "everynode_pods_created_total",
			Help: "Daemon pods created, by why they were created.",
		}, []string{"reason"}),
		podsDeleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "everynode_pods_deleted_total",
			Help: "Daemon pods deleted, by why they were deleted.",
		}, []string{"reason"}),
		failedPods: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "everynode_failed_pods_total",
			Help: "Failed daemon pods found and deleted.",
		}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "everynode_decisions_total",
			Help: "Decisions made by syncs: incremental (from the DaemonSet's memo, looking at changed nodes only) or full.",
		}, []string{"way"}),
		desired: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "everynode_daemonset_desired_pods",
			Help: "Nodes that should run the DaemonSet's pod (status.desiredNumberScheduled).",
		}, dsLabels),
		updated: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "everynode_daemonset_updated_pods",
			Help: "Nodes running the current revision (status.updatedNumberScheduled).",
		}, dsLabels),
		available: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "everynode_daemonset_available_pods",
			Help: "Nodes with an available pod (status.numberAvailable).",
		}, dsLabels),
	}
	m.reg = reg
	reg.MustRegister(m.syncDuration, m.podsCreated, m.podsDeleted, m.failedPods, m.decisions, m.desired, m.updated, m.available,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "everynode_workqueue_depth",
			Help: "DaemonSets waiting to be synced.",
		}, func() float64 {
			if m.queueDepth == nil {
				return 0
			}
			return float64(m.queueDepth())
		}))
	return m
}

// observeDecision counts a decision, incremental or full.
func (m *Metrics) observeDecision(incremental bool) {
	way := "full"
	if incremental {
		way = "incremental"
	}
	m.decisions.WithLabelValues(way).Inc()
}

func (m *Metrics) observeStatus(ds *apps.DaemonSet, s *apps.DaemonSetStatus) {
	m.desired.WithLabelValues(ds.Namespace, ds.Name).Set(float64(s.DesiredNumberScheduled))
	m.updated.WithLabelValues(ds.Namespace, ds.Name).Set(float64(s.UpdatedNumberScheduled))
	m.available.WithLabelValues(ds.Namespace, ds.Name).Set(float64(s.NumberAvailable))
}

func (m *Metrics) forget(namespace, name string) {
	for _, g := range []*prometheus.GaugeVec{m.desired, m.updated, m.available} {
		g.DeleteLabelValues(namespace, name)
	}
}
