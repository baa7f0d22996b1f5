package controller

import (
	"cmp"
	"time"

	"github.com/everynode/everynode/internal/daemon"
	"github.com/go-logr/logr"
	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// The order pod writes go out in, across DaemonSets.
//
// Under a client rate limit the order of pod creates decides how long a new node
// stays unusable: it turns Ready only once its network agent runs, and that agent is
// a DaemonSet pod among all the others. So the controller sends pod writes by rank,
// highest first, whichever DaemonSet they belong to:
//
//  1. the pod's priority, as the API server will resolve it (Priorities.Of);
//  2. then the pods of a DaemonSet gating the node (daemon/nodegate.go): the node's
//     gate taint goes once they are available, and every pod that does not
//     tolerate it waits for them;
//  3. then pods that tolerate the not-ready and network-unavailable taints: they can
//     run on a node that is not Ready yet, and are what makes it Ready;
//  4. then the node that has waited longest (Since).
//
// The first three make a rank's level (CompareLevel). Within one level the controller
// takes DaemonSets in turn, so that no DaemonSet with a long backlog holds back
// another's pod for a node that just joined; within one DaemonSet it takes the node
// that has waited longest first (CompareRank), then the write queued first.

// System priority classes exist in every cluster, with these values, even before
// their PriorityClass objects are listed.
const (
	SystemNodeCritical    = "system-node-critical"
	SystemClusterCritical = "system-cluster-critical"

	SystemNodeCriticalPriority    int32 = 2000001000
	SystemClusterCriticalPriority int32 = 2000000000
)

// Priorities resolves a pod's priorityClassName to its priority, as the API server's
// Priority admission plugin will when the pod is created.
type Priorities struct {
	classes map[string]int32
	// def is the globalDefault class's value (0 if none): the priority of a pod
	// naming no class.
	def int32
}

// NewPriorities indexes a cluster's PriorityClasses. Of several global defaults the
// lowest counts. The zero Priorities knows the system classes only.
func NewPriorities(classes []*schedulingv1.PriorityClass) Priorities {
	p := Priorities{classes: make(map[string]int32, len(classes))}
	haveDefault := false
	for _, c := range classes {
		p.classes[c.Name] = c.Value
		if c.GlobalDefault && (!haveDefault || c.Value < p.def) {
			p.def, haveDefault = c.Value, true
		}
	}
	return p
}

// Of is the priority of a pod with spec. A priority already in the spec (a pod the
// API server admitted) is taken as it is. A class that does not exist (the pod's
// create will be refused) ranks as 0.
func (p Priorities) Of(spec *v1.PodSpec) int32 {
	if spec.Priority != nil {
		return *spec.Priority
	}
	switch spec.PriorityClassName {
	case "":
		return p.def
	case SystemNodeCritical:
		return SystemNodeCriticalPriority
	case SystemClusterCritical:
		return SystemClusterCriticalPriority
	}
	return p.classes[spec.PriorityClassName]
}

// The taints of a node that is not Ready yet, or whose network is not up.
var unreadyTaints = []v1.Taint{
	{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoSchedule},
	{Key: v1.TaintNodeNetworkUnavailable, Effect: v1.TaintEffectNoSchedule},
}

// UnblocksNodes reports whether a daemon pod with spec can run on a node that is not
// Ready and has no pod network: the mark of a network agent, which makes it Ready.
func UnblocksNodes(spec *v1.PodSpec) bool {
	tolerations := daemon.DaemonPodTolerations(spec)
	for i := range unreadyTaints {
		if !corev1helpers.TolerationsTolerateTaint(logr.Discard(), tolerations, &unreadyTaints[i], false) {
			return false
		}
	}
	return true
}

// WriteRank is where a pod write stands in the order writes go out in.
type WriteRank struct {
	Priority int32
	// Gates: the pod is one the node's gate taint waits for.
	Gates    bool
	Unblocks bool
	// Since is when the node started waiting for the write: the later of when it
	// joined and when the DaemonSet was created.
	Since time.Time
}

// Rank ranks a pod write of ds for node (nil if the cache has it no more): the
// create of a pod from template, or the delete of one of ds's pods, which ranks as
// the pod it makes room for (template is then ds's own). The pods in the controller's
// cache keep too little of their spec to rank them by.
func Rank(prio Priorities, ds *apps.DaemonSet, template *v1.PodTemplateSpec, node *v1.Node) WriteRank {
	return newRanker(prio, ds).rank(template, node)
}

// ranker ranks the pod writes of one DaemonSet as Rank does, working out what a rank
// takes from the template (its priority, whether it unblocks nodes) once for each
// template rather than once for each write: a sync may rank thousands of creates of
// one template.
type ranker struct {
	prio     Priorities
	ds       *apps.DaemonSet
	template *v1.PodTemplateSpec // the last template ranked
	level    WriteRank           // what its ranks take from it
}

func newRanker(prio Priorities, ds *apps.DaemonSet) *ranker { return &ranker{prio: prio, ds: ds} }

// rank ranks a write of a pod from template for node (nil if the cache has it no
// more).
func (r *ranker) rank(template *v1.PodTemplateSpec, node *v1.Node) WriteRank {
	if template != r.template {
		r.template = template
		r.level = WriteRank{Priority: r.prio.Of(&template.Spec), Unblocks: UnblocksNodes(&template.Spec)}
	}
	w := r.level
	w.Gates, w.Since = gates(r.ds, node), nodeWaitingSince(r.ds, node)
	return w
}

// gates reports whether ds gates node: node carries the taint ds's pod must be
// available for before it goes.
func gates(ds *apps.DaemonSet, node *v1.Node) bool {
	if _, ok := ds.Annotations[daemon.AnnotationNodeGate]; !ok || node == nil {
		return false
	}
	g := daemon.ParseNodeGate(ds)
	return g.Key != "" && len(daemon.GateTaints(node, g.Key)) > 0
}

func nodeWaitingSince(ds *apps.DaemonSet, node *v1.Node) time.Time {
	since := ds.CreationTimestamp.Time
	if node != nil && node.CreationTimestamp.After(since) {
		since = node.CreationTimestamp.Time
	}
	return since
}

// CompareLevel orders ranks by level, the higher first: by priority, then pods a
// node's gate waits for, then pods that unblock nodes. It is negative when a goes
// before b.
func CompareLevel(a, b WriteRank) int {
	return cmp.Or(cmp.Compare(b.Priority, a.Priority), first(a.Gates, b.Gates), first(a.Unblocks, b.Unblocks))
}

// first orders a before b when only a is true.
func first(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// CompareRank orders ranks in full: by level, then the node that has waited longest
// first. The queue sends writes of equal rank in the order they were first queued.
func CompareRank(a, b WriteRank) int {
	if c := CompareLevel(a, b); c != 0 {
		return c
	}
	return a.Since.Compare(b.Since)
}
