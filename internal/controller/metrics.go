package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	apps "k8s.io/api/apps/v1"

	"github.com/everynode/everynode/internal/daemon"
)

// Metrics are the controller's Prometheus metrics. They live in the registry given to
// NewMetrics, never in a global one.
type Metrics struct {
	reg          prometheus.Registerer
	syncDuration *prometheus.HistogramVec
	podsCreated  *prometheus.CounterVec
	podsDeleted  *prometheus.CounterVec
	podsUpdated  *prometheus.CounterVec
	failedPods   prometheus.Counter
	decisions    *prometheus.CounterVec
	desired      *prometheus.GaugeVec
	updated      *prometheus.GaugeVec
	available    *prometheus.GaugeVec
	progressing  *dsGauges
	waiting      *dsGauges
	unavailable  *dsGauges
	leading      prometheus.Gauge
	queueDepth   func() int
	podWrites    func() int
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
		podsUpdated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "everynode_pods_updated_in_place_total",
			Help: "Daemon pods updated in place to a new revision (rollout.everynode.dev/in-place), by why.",
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
		progressing: newDSGauges(prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "everynode_daemonset_rollout_state",
			Help: "1 for the DaemonSet's Progressing condition, by its status and reason (RollingOut, NewRevisionAvailable, Paused, a failure ...); only for DaemonSets with rollout annotations.",
		}, append(dsLabels, "status", "reason")), 2),
		waiting: newDSGauges(prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "everynode_daemonset_nodes_waiting",
			Help: "Nodes where something the DaemonSet should do waits, by what it waits for (as everynode explain says: BudgetFull, NewPodNotAvailable, Paused, FailedPodBackoff ...).",
		}, append(dsLabels, "reason")), 1),
		unavailable: newDSGauges(prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "everynode_daemonset_unavailable_pods",
			Help: "Nodes that should run the DaemonSet's pod and have no available one, by cause (as everynode explain says: Updating, Starting, Failing, NodeNotReady, NodeShuttingDown, NodeMaintenance, Evicted, Unknown).",
		}, append(dsLabels, "cause")), 1),
		leading: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "everynode_leading",
			Help: "1 while this replica leads (holds the Lease, or runs without leader election) and syncs DaemonSets; 0 while it stands by.",
		}),
	}
	m.reg = reg
	reg.MustRegister(m.syncDuration, m.podsCreated, m.podsDeleted, m.podsUpdated, m.failedPods, m.decisions, m.desired, m.updated, m.available,
		m.progressing.vec, m.waiting.vec, m.unavailable.vec, m.leading,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "everynode_workqueue_depth",
			Help: "DaemonSets waiting to be synced.",
		}, func() float64 {
			if m.queueDepth == nil {
				return 0
			}
			return float64(m.queueDepth())
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "everynode_pod_writes_queued",
			Help: "Pod creates and deletes decided and waiting to be sent, across DaemonSets.",
		}, func() float64 {
			if m.podWrites == nil {
				return 0
			}
			return float64(m.podWrites())
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

// observeProgressing records the DaemonSet's Progressing condition (nil for none).
func (m *Metrics) observeProgressing(ds *apps.DaemonSet, c *apps.DaemonSetCondition) {
	var series map[seriesLabels]float64
	if c != nil {
		series = map[seriesLabels]float64{{string(c.Status), c.Reason}: 1}
	}
	m.progressing.set(ds.Namespace, ds.Name, series)
}

// observeWaiting records how many of the DaemonSet's nodes wait, by reason.
func (m *Metrics) observeWaiting(ds *apps.DaemonSet, waiting map[daemon.Reason]int) {
	var series map[seriesLabels]float64
	for reason, n := range waiting {
		if series == nil {
			series = make(map[seriesLabels]float64, len(waiting))
		}
		series[seriesLabels{string(reason)}] = float64(n)
	}
	m.waiting.set(ds.Namespace, ds.Name, series)
}

// observeUnavailable records how many of the DaemonSet's nodes have no available
// pod, by cause.
func (m *Metrics) observeUnavailable(ds *apps.DaemonSet, causes []daemon.CauseCount) {
	var series map[seriesLabels]float64
	for _, c := range causes {
		if series == nil {
			series = make(map[seriesLabels]float64, len(causes))
		}
		series[seriesLabels{string(c.Cause)}] += float64(c.Nodes)
	}
	m.unavailable.set(ds.Namespace, ds.Name, series)
}

// SetLeading records whether this replica leads.
func (m *Metrics) SetLeading(leading bool) {
	v := 0.0
	if leading {
		v = 1
	}
	m.leading.Set(v)
}

func (m *Metrics) forget(namespace, name string) {
	for _, g := range []*prometheus.GaugeVec{m.desired, m.updated, m.available} {
		g.DeleteLabelValues(namespace, name)
	}
	for _, g := range []*dsGauges{m.progressing, m.waiting, m.unavailable} {
		g.forget(namespace, name)
	}
}
