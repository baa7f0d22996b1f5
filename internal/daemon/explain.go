package daemon

import (
	"fmt"
	"slices"
	"strings"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Report answers "why is (or isn't) there a pod on this node?" for every node. It is
// computed by the same rules as Decide, from the same kind of Snapshot.
type Report struct {
	// Revision and Hash name the current template's revision (Revision is zero when
	// it is not recorded yet).
	Revision int64
	Hash     string
	// Progressing is the rollout's condition as the next sync would store it (the
	// stored one when that sync does not assess the rollout); nil when there is none.
	Progressing *apps.DaemonSetCondition
	// Policy is the rollout policy the decision applied; its Problems are the
	// rollout annotations that do not parse or cannot apply.
	Policy Policy
	// Problems are Policy.Problems.
	Problems []string
	// Companion: the DaemonSet is one companion mode manages, and the report is of
	// the update stage alone (another controller creates its pods).
	Companion bool
	// Settled: no write is outstanding and the placement rules plan none, so a
	// RollingUpdate is assessed (its own creates and deletes may follow).
	Settled bool
	// Nodes are in name order.
	Nodes []NodeReport
	// Unavailable counts the nodes that should run the pod and have no available
	// one, by cause (causes.go), most first; nil when none.
	Unavailable []CauseCount
	// Events are what the next sync would record, such as an invalid spec.
	Events []Event
}

// NodeReport is one node's answer.
type NodeReport struct {
	Node string
	// Verdict: whether the DaemonSet should run here and, if not, which rule says so.
	Verdict Verdict
	// Wave is the node's value of the waves label, when the rollout goes by waves.
	Wave string
	Pods []PodReport
	// Waiting is what the rollout or the placement waits for on this node ("" for
	// nothing), until Until when that ends by itself.
	Waiting Reason
	Until   time.Time
	// Failures counts the DaemonSet's failed pods on the node, when one is there
	// (the step of its failed-pod back-off).
	Failures int
	// Unavailable, for a node that should run the pod and has no available one,
	// says why; nil otherwise.
	Unavailable *Unavailable
	// Next are the changes the next sync makes here, for people.
	Next []string
}

// PodReport is one of the DaemonSet's pods on a node.
type PodReport struct {
	Name      string
	Hash      string // the revision it runs
	Updated   bool   // it runs the current template
	Phase     v1.PodPhase
	Ready     bool
	Available bool
	Deleting  bool
}

// Explain reports, node by node, what Decide would decide and why. For a DaemonSet
// that companion mode manages (see CompanionManages) it reports what DecideUpdate
// would decide: the update stage over the placement another controller keeps.
func Explain(s *Snapshot) Report {
	companion := CompanionManages(s.DaemonSet)
	decideFor := decide
	if companion {
		decideFor = decideUpdate
	}
	p, d := decideFor(s)
	r := Report{Hash: p.Hash, Events: p.Events, Settled: d != nil && d.settled, Companion: companion}
	pol := policyOf(s, companion)
	r.Policy, r.Problems = pol, pol.Problems
	switch {
	case len(p.Conditions) > 0:
		r.Progressing = Condition(p.Conditions, ConditionProgressing)
	case p.Status != nil:
		r.Progressing = Progressing(p.Status)
	default:
		r.Progressing = Progressing(&s.DaemonSet.Status)
	}
	if d == nil {
		return r
	}
	for _, rev := range s.Revisions {
		if rev.Labels[HashLabel] == p.Hash && metav1.IsControlledBy(rev, s.DaemonSet) {
			r.Revision = rev.Revision
		}
	}
	next := map[string][]string{}
	for _, c := range p.Creates {
		what := "create a pod of the current revision"
		if c.Template != nil {
			what = "create a pod of the stable revision " + c.Template.Labels[HashLabel]
		}
		next[c.Node] = append(next[c.Node], fmt.Sprintf("%s (%s)", what, c.Reason))
	}
	for _, d := range p.Deletes {
		node, _ := TargetNode(d.Pod)
		next[node] = append(next[node], fmt.Sprintf("delete pod %s (%s)", d.Pod.Name, d.Reason))
	}
	for _, u := range p.Updates {
		node, _ := TargetNode(u.Pod)
		next[node] = append(next[node], fmt.Sprintf("update pod %s in place (%s)", u.Pod.Name, u.Reason))
	}
	pl := d.placement
	r.Unavailable = pl.unavailable()
	for i, n := range pl.nodes {
		if companion && n.node != nil && n.verdict.Run && !pl.hasLivePod(n) {
			next[n.name] = append(next[n.name], "wait for the DaemonSet controller that places pods to create one")
		}
		wait, until := d.waitOf(i)
		nr := NodeReport{Node: n.name, Verdict: n.verdict, Waiting: wait, Until: until, Failures: n.failures, Next: next[n.name]}
		if n.verdict.node == "" {
			nr.Verdict.node = n.name
		}
		if n.node != nil && pol.WaveKey != "" {
			nr.Wave = n.node.Labels[pol.WaveKey]
		}
		if u, ok := pl.unavailableOn(n); ok {
			nr.Unavailable = &u
		}
		for _, pod := range n.pods {
			nr.Pods = append(nr.Pods, PodReport{Name: pod.Name, Hash: pod.Labels[HashLabel], Updated: pl.updated(pod),
				Phase: pod.Status.Phase, Ready: IsReady(pod), Available: pl.available(pod), Deleting: pl.deleting(pod)})
		}
		slices.SortFunc(nr.Pods, func(a, b PodReport) int { return strings.Compare(a.Name, b.Name) })
		r.Nodes = append(r.Nodes, nr)
	}
	slices.SortFunc(r.Nodes, func(a, b NodeReport) int { return strings.Compare(a.Node, b.Node) })
	return r
}

// WaitMessage says, for people, what a node waits for.
func (n NodeReport) WaitMessage() string {
	switch n.Waiting {
	case "":
		return ""
	case ReasonFailedPodBackoff:
		if n.Failures > 1 {
			return fmt.Sprintf("the back-off after its pod failed (%d failed pods here so far), then the failed pod is replaced", n.Failures)
		}
	}
	return DescribeWait(n.Waiting).Waiting
}
