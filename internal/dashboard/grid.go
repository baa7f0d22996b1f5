// Package dashboard serves everynode's web dashboard: every DaemonSet with its
// counters, and for one DaemonSet a live grid of its nodes, coloured by what the
// rollout does there, computed by the same rules as `everynode explain`.
package dashboard

import (
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/everynode/everynode/internal/daemon"
	"github.com/everynode/everynode/internal/inspect"
)

// State is a grid cell's colour.
type State string

const (
	// StateCurrent: the node runs an available pod of the current revision.
	StateCurrent State = "current"
	// StateUpdating: the node's pod is being created, replaced or updated in place,
	// or its new pod is starting or baking.
	StateUpdating State = "updating"
	// StateWaiting: the node runs an old revision and waits for its turn (Why says
	// for what).
	StateWaiting State = "waiting"
	// StateFailing: the node's pod failed, or the rollout failed there.
	StateFailing State = "failing"
	// StateIneligible: the DaemonSet does not run on the node.
	StateIneligible State = "ineligible"
)

// ZoneLabel groups the grid when the rollout has no waves.
const ZoneLabel = v1.LabelTopologyZone

// Cell is one node of the grid.
type Cell struct {
	Node  string `json:"node"`
	State State  `json:"state"`
	// Why is a short word for what the node waits for ("" when nothing).
	Why string `json:"why,omitempty"`
}

// Group is the cells of one wave or zone, in node name order.
type Group struct {
	Name  string `json:"name"`
	Cells []Cell `json:"cells"`
}

// Grid is one DaemonSet's nodes, grouped by wave (or zone).
type Grid struct {
	// GroupBy is the node label the groups are values of ("" for one group).
	GroupBy string  `json:"groupBy"`
	Groups  []Group `json:"groups"`
}

// CellOf classifies one node's report.
func CellOf(n daemon.NodeReport) Cell {
	wait := daemon.DescribeWait(n.Waiting)
	c := Cell{Node: n.Node, Why: wait.Short}
	if c.Why == "" && n.Waiting != "" {
		c.Why = string(n.Waiting)
	}
	var current, old, deleting, podFailed bool
	for _, p := range n.Pods {
		switch {
		case p.Deleting:
			deleting = true
		case p.Phase == v1.PodFailed:
			podFailed = true
		case p.Updated && p.Available:
			current = true
		case !p.Updated:
			old = true
		}
	}
	switch {
	case !n.Verdict.Run && len(n.Pods) == 0:
		c.State, c.Why = StateIneligible, string(n.Verdict.Reason)
	case wait.Kind == daemon.WaitFailed || podFailed:
		c.State = StateFailing
	case wait.Kind == daemon.WaitUpdating || len(n.Next) > 0 || deleting:
		c.State = StateUpdating
	case old:
		c.State = StateWaiting
		if c.Why == "" {
			// Nothing in the rules moves the node: an OnDelete DaemonSet's pod
			// waits to be deleted by hand.
			c.Why = "on delete"
		}
	case current:
		c.State = StateCurrent
	default:
		// An eligible node with no pod, or a pod not yet available, and no write
		// planned: the pod is on its way.
		c.State = StateUpdating
		if c.Why == "" {
			c.Why = "starting"
		}
	}
	return c
}

// GridOf lays out an explanation's nodes: by the rollout's waves, in the order it
// takes them; else by zone (sorted), when any node has a zone; else in one group.
// The nodes without the label come last.
// nodes gives each node's labels; a node the report names but nodes lacks (a pod
// bound to a deleted node) goes in the group of no label.
func GridOf(e *inspect.Explanation, nodes map[string]*v1.Node) Grid {
	g := Grid{GroupBy: e.WaveKey}
	if g.GroupBy == "" {
		for _, n := range nodes {
			if n.Labels[ZoneLabel] != "" {
				g.GroupBy = ZoneLabel
				break
			}
		}
	}
	byGroup := map[string][]Cell{}
	for _, n := range e.Report.Nodes {
		group := n.Wave
		if e.WaveKey == "" && g.GroupBy != "" {
			if node := nodes[n.Node]; node != nil {
				group = node.Labels[g.GroupBy]
			}
		}
		byGroup[group] = append(byGroup[group], CellOf(n))
	}
	var order []string
	if e.WaveKey != "" {
		order = e.Report.Policy.WaveOrder
	}
	for _, name := range daemon.OrderWaves(slices.Collect(maps.Keys(byGroup)), order) {
		g.Groups = append(g.Groups, Group{Name: name, Cells: byGroup[name]})
	}
	return g
}
