package daemon

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Property tests: Decide's invariants over random clusters. Seeds are fixed so a
// failure names the seed that reproduces it.

const propertyRuns = 3000

func TestDecideInvariantsOnRandomClusters(t *testing.T) {
	for seed := uint64(1); seed <= propertyRuns; seed++ {
		r := rand.New(rand.NewPCG(seed, 0x5eed))
		s := randomSnapshot(r, seed%2 == 0)
		before := deepCopySnapshot(s)
		p := Decide(s)
		if err := checkPlan(s, p); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if !reflect.DeepEqual(before, deepCopySnapshot(s)) {
			t.Fatalf("seed %d: Decide modified its snapshot", seed)
		}
		if again := Decide(s); !reflect.DeepEqual(p, again) {
			t.Fatalf("seed %d: Decide is not deterministic", seed)
		}
	}
}

// The same over random rollout policies, which also must hold what they promise to.
func TestDecideInvariantsWithRolloutPolicy(t *testing.T) {
	for seed := uint64(1); seed <= propertyRuns/6; seed++ {
		r := rand.New(rand.NewPCG(seed, 0x9011))
		s := randomSnapshot(r, seed%3 != 0)
		ds := s.DaemonSet
		if ds.Annotations == nil {
			ds.Annotations = map[string]string{}
		}
		for _, kv := range [][2]string{
			{AnnotationPaused, "true"}, {AnnotationPartition, fmt.Sprint(r.IntN(4))}, {AnnotationPartition, "50%"},
			{AnnotationCanary, "zone=a"}, {AnnotationWaves, "zone"}, {AnnotationWaveOrder, "b"},
			{AnnotationWavePause, "1m"}, {AnnotationNewNodes, NewNodesStable}, {AnnotationProgressDeadline, "1m"},
			{AnnotationMaxRestarts, "0"}, {AnnotationOnFailure, OnFailureRollback}, {AnnotationPaused, "later"},
		} {
			if r.IntN(5) == 0 {
				ds.Annotations[kv[0]] = kv[1]
			}
		}
		if r.IntN(3) == 0 {
			withProgressing(ReasonRollingOut, v1.ConditionTrue, t0.Add(-time.Duration(r.IntN(5))*time.Minute))(ds)
		}
		for _, rev := range s.Revisions {
			if r.IntN(4) == 0 {
				rev.Annotations = map[string]string{MarkFailed: fmt.Sprintf("%d ProgressDeadlineExceeded: x", rev.Revision)}
			}
		}
		for _, pod := range s.Pods {
			if r.IntN(6) == 0 {
				withRestarts(0, 1)(pod)
			}
		}
		before := deepCopySnapshot(s)
		p := Decide(s)
		if err := checkPlan(s, p); err != nil {
			t.Fatalf("seed %d %v: %v", seed, ds.Annotations, err)
		}
		if !reflect.DeepEqual(before, deepCopySnapshot(s)) {
			t.Fatalf("seed %d: Decide modified its snapshot", seed)
		}
		if again := Decide(s); !reflect.DeepEqual(p, again) {
			t.Fatalf("seed %d: Decide is not deterministic", seed)
		}
		if err := checkPolicy(s, p); err != nil {
			t.Fatalf("seed %d %v: %v", seed, ds.Annotations, err)
		}
		if rep := Explain(s); !reflect.DeepEqual(rep.Events, p.Events) {
			t.Fatalf("seed %d: Explain records %v, Decide %v", seed, rep.Events, p.Events)
		}
	}
}

// checkPolicy checks that the rollout's own creates and deletes keep to the policy.
func checkPolicy(s *Snapshot, p Plan) error {
	pol := ParsePolicy(s.DaemonSet.Annotations)
	held := pol.Paused || len(pol.Problems) > 0
	for _, rev := range s.Revisions {
		if _, _, failed := failedMark(rev); failed && pol.Set && rev.Labels[HashLabel] == p.Hash {
			held = true
		}
	}
	zone := map[string]string{}
	for _, n := range s.Nodes {
		zone[n.Name] = n.Labels["zone"]
	}
	var moved []string // the nodes the rollout updates
	for _, c := range p.Creates {
		if c.Reason == ReasonSurge {
			moved = append(moved, c.Node)
		}
		if c.Template != nil && (!pol.StableNewNodes || c.Template.Labels[HashLabel] == p.Hash) {
			return fmt.Errorf("create on %s from template %v", c.Node, c.Template.Labels)
		}
	}
	for _, d := range p.Deletes {
		if d.Reason == ReasonUpdate {
			node, _ := TargetNode(d.Pod)
			moved = append(moved, node)
		}
	}
	for _, node := range moved {
		switch {
		case held:
			return fmt.Errorf("held, yet node %s is updated", node)
		case pol.Canary != nil && zone[node] != "a":
			return fmt.Errorf("node %s is updated, not a canary", node)
		case pol.WaveKey != "" && zone[node] != zone[moved[0]]:
			return fmt.Errorf("nodes %v of several waves are updated", moved)
		}
	}
	if p.Rollback != nil && (!pol.Rollback || len(pol.Problems) > 0) {
		return fmt.Errorf("rollback to %s", p.Rollback.Name)
	}
	return nil
}

var randomTaints = []v1.Taint{
	{Key: "dedicated", Value: "x", Effect: v1.TaintEffectNoSchedule},
	{Key: "dedicated", Value: "x", Effect: v1.TaintEffectNoExecute},
	{Key: "spot", Effect: v1.TaintEffectPreferNoSchedule},
	{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoExecute},
	{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule},
	{Key: v1.TaintNodeNetworkUnavailable, Effect: v1.TaintEffectNoSchedule},
}

func randomBudget(r *rand.Rand) dsOpt {
	switch r.IntN(6) {
	case 0:
		return withOnDelete()
	case 1:
		return func(ds *apps.DaemonSet) { ds.Spec.UpdateStrategy.RollingUpdate = nil }
	case 2:
		return withBudget("0", fmt.Sprintf("%d%%", r.IntN(60)))
	case 3:
		return withBudget(fmt.Sprint(1+r.IntN(3)), "0")
	case 4:
		return withBudget(fmt.Sprintf("%d%%", 1+r.IntN(50)), "0")
	}
	return withBudget("", fmt.Sprint(r.IntN(4)))
}

// randomSnapshot makes a random cluster. A settled one has no finished, terminating,
// misplaced or in-flight pods, so that the rolling update gets to act.
func randomSnapshot(r *rand.Rand, settled bool) *Snapshot {
	opts := []dsOpt{randomBudget(r), withMinReady(int32(r.IntN(2) * 30))}
	if r.IntN(2) == 0 {
		opts = append(opts, withNodeSelector("zone", "a"))
	}
	if r.IntN(3) == 0 {
		opts = append(opts, withTolerations(v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}))
	}
	ds := newDS("ds", opts...)
	ds.Spec.Template.Spec.HostNetwork = r.IntN(2) == 0
	if r.IntN(4) == 0 {
		ds.Annotations = map[string]string{TemplateGenerationAnnotation: "2"}
	}
	s := snap(ds, nil)
	cur := hashOf(ds)
	if r.IntN(2) == 0 {
		cur = "cur"
		patch, _ := TemplatePatch(&ds.Spec.Template)
		s.Revisions = append(s.Revisions, revision(ds, "ds-cur", cur, 2, patch))
	}
	s.Revisions = append(s.Revisions, revision(ds, "ds-old", "old", 1, []byte(`{}`)))

	var names []string
	for i := range r.IntN(12) {
		n := newNode(fmt.Sprintf("node-%02d", i), withLabels("zone", []string{"a", "b"}[r.IntN(2)]))
		for _, taint := range randomTaints {
			if r.IntN(8) == 0 {
				n.Spec.Taints = append(n.Spec.Taints, taint)
			}
		}
		switch r.IntN(8) {
		case 0: // NotReady for up to two minutes: sick, or within a sick-node grace
			withNodeCondition(v1.NodeReady, []v1.ConditionStatus{v1.ConditionFalse, v1.ConditionUnknown}[r.IntN(2)], t0.Add(-time.Duration(r.IntN(120))*time.Second), "")(n)
		case 1:
			withNodeCondition(v1.NodeDrainInProgress, v1.ConditionTrue, t0, "")(n)
		}
		s.Nodes = append(s.Nodes, n)
		names = append(names, n.Name)
	}
	r.Shuffle(len(s.Nodes), func(i, j int) { s.Nodes[i], s.Nodes[j] = s.Nodes[j], s.Nodes[i] })
	if settled {
		settle(r, s, cur)
		return s
	}
	names = append(names, "gone-1", "gone-2")

	other := newDS("other")
	for _, node := range names {
		for range []int{0, 1, 1, 1, 2, 3}[r.IntN(6)] {
			pod := randomPod(r, ds, other, fmt.Sprintf("p%03d", len(s.Pods)), node, cur)
			s.Pods = append(s.Pods, pod)
			if r.IntN(10) == 0 {
				s.InFlight.Deletes = setUID(s.InFlight.Deletes, pod.UID)
			}
		}
		if r.IntN(10) == 0 {
			s.InFlight.Creates = setNode(s.InFlight.Creates, node)
		}
		if r.IntN(6) == 0 {
			if s.Backoff == nil {
				s.Backoff = map[string]time.Time{}
			}
			s.Backoff[node] = t0.Add(time.Duration(r.IntN(120)-60) * time.Second)
		}
	}
	if r.IntN(3) == 0 {
		s.MaxCreates, s.MaxDeletes = 1+r.IntN(4), 1+r.IntN(4)
	}
	return s
}

// settle gives every node that should run the pod one running pod, of a random
// revision and readiness; while surging some also run a second one, and nodes that
// keep but do not start pods may run one.
func settle(r *rand.Rand, s *Snapshot, cur string) {
	ds := s.DaemonSet
	elig := NewEligibility(&ds.Spec.Template.Spec)
	ready := func() podOpt {
		if r.IntN(4) == 0 {
			return notReady()
		}
		return readySince(t0.Add(-time.Duration(r.IntN(90)) * time.Second))
	}
	for _, n := range s.Nodes {
		v := elig.Check(n)
		if !v.Run && (!v.KeepRunning || r.IntN(2) == 0) {
			continue
		}
		hash := []string{cur, "old", "old"}[r.IntN(3)]
		s.Pods = append(s.Pods, newPod(ds, "a-"+n.Name, n.Name, withHash(hash), ready(), createdAt(t0.Add(-time.Hour))))
		if allowsSurge(ds) && hash != cur && r.IntN(3) == 0 {
			s.Pods = append(s.Pods, newPod(ds, "b-"+n.Name, n.Name, withHash(cur), ready(), unbound()))
		}
	}
}

func randomPod(r *rand.Rand, ds, other *apps.DaemonSet, name, node, cur string) *v1.Pod {
	var opts []podOpt
	opts = append(opts, withHash([]string{cur, cur, "old", "older"}[r.IntN(4)]))
	if r.IntN(4) == 0 {
		opts = append(opts, unbound())
	}
	if r.IntN(20) == 0 {
		opts = append(opts, func(p *v1.Pod) { p.Spec.NodeName, p.Spec.Affinity = "", nil })
	}
	switch r.IntN(8) {
	case 0:
		opts = append(opts, failed())
	case 1:
		opts = append(opts, succeeded())
	case 2:
		opts = append(opts, withPhase(v1.PodPending), notReady())
	case 3:
		opts = append(opts, notReady())
	default:
		opts = append(opts, readySince(t0.Add(-time.Duration(r.IntN(120))*time.Second)))
	}
	if r.IntN(7) == 0 {
		opts = append(opts, terminating())
	}
	switch r.IntN(20) {
	case 0, 1:
		opts = append(opts, orphan())
	case 2:
		opts = append(opts, func(p *v1.Pod) { p.OwnerReferences = []metav1.OwnerReference{*ControllerRef(other)} })
	case 3:
		opts = append(opts, func(p *v1.Pod) { p.Labels["app"] = "elsewhere" })
	}
	opts = append(opts, createdAt(t0.Add(-time.Duration(r.IntN(4))*time.Hour)))
	if r.IntN(10) == 0 {
		opts = append(opts, func(p *v1.Pod) { p.Labels[TemplateGenerationLabel] = "2" })
	}
	return newPod(ds, name, node, opts...)
}

// checkPlan checks the invariants every Plan must keep, recomputing what it needs
// from the snapshot by the documented rules.
func checkPlan(s *Snapshot, p Plan) error {
	ds := s.DaemonSet
	elig := NewEligibility(&ds.Spec.Template.Spec)
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return err
	}
	nodeByName := map[string]*v1.Node{}
	for _, n := range s.Nodes {
		nodeByName[n.Name] = n
	}
	gen, hasGen := templateGeneration(ds.Annotations)
	inSnapshot, claimed := map[*v1.Pod]bool{}, map[*v1.Pod]bool{}
	deleting := func(pod *v1.Pod) bool { return pod.DeletionTimestamp != nil || s.InFlight.Deletes[pod.UID] }
	seenOn := map[string]int{}       // pods the placement rules see on a node
	liveOn := map[string][]*v1.Pod{} // of those, the running ones
	for _, pod := range s.Pods {
		inSnapshot[pod] = true
		if c := decideClaim(pod, ds.UID, selector); c != claimOwned && c != claimAdopt {
			continue
		}
		claimed[pod] = true
		node, ok := TargetNode(pod)
		if !ok || (isTerminal(pod) && pod.DeletionTimestamp != nil) {
			continue
		}
		seenOn[node]++
		if !deleting(pod) && !isTerminal(pod) {
			liveOn[node] = append(liveOn[node], pod)
		}
	}
	surge := allowsSurge(ds)

	created := map[string]bool{}
	for _, c := range p.Creates {
		n := nodeByName[c.Node]
		switch {
		case n == nil:
			return fmt.Errorf("create on %s, which does not exist", c.Node)
		case !elig.Check(n).Run:
			return fmt.Errorf("create on %s, whose verdict is %s", c.Node, elig.Check(n).Reason)
		case s.InFlight.Creates[c.Node]:
			return fmt.Errorf("create on %s while a create is in flight", c.Node)
		case created[c.Node]:
			return fmt.Errorf("two creates on %s", c.Node)
		case !surge && seenOn[c.Node] > 0:
			return fmt.Errorf("create on %s, which has a pod", c.Node)
		case surge && len(liveOn[c.Node]) > 1:
			return fmt.Errorf("surge create on %s, which runs %d pods", c.Node, len(liveOn[c.Node]))
		}
		for _, pod := range liveOn[c.Node] {
			if isUpdated(pod, p.Hash, gen, hasGen) {
				return fmt.Errorf("create on %s beside its running current pod %s", c.Node, pod.Name)
			}
		}
		created[c.Node] = true
	}
	deleted := map[types.UID]bool{}
	for _, d := range p.Deletes {
		switch {
		case !inSnapshot[d.Pod]:
			return fmt.Errorf("delete of %s, not a snapshot pod", d.Pod.Name)
		case !claimed[d.Pod]:
			return fmt.Errorf("delete of %s, which is not the DaemonSet's", d.Pod.Name)
		case deleted[d.Pod.UID]:
			return fmt.Errorf("%s deleted twice", d.Pod.Name)
		case deleting(d.Pod):
			return fmt.Errorf("delete of %s, which is already terminating", d.Pod.Name)
		}
		deleted[d.Pod.UID] = true
	}
	if (s.MaxCreates > 0 && len(p.Creates) > s.MaxCreates) || (s.MaxDeletes > 0 && len(p.Deletes) > s.MaxDeletes) {
		return fmt.Errorf("caps exceeded: %d creates, %d deletes", len(p.Creates), len(p.Deletes))
	}
	for _, node := range p.FailedPodNodes {
		found := false
		for _, d := range p.Deletes {
			target, _ := TargetNode(d.Pod)
			found = found || (d.Reason == ReasonFailedPod && target == node)
		}
		if !found {
			return fmt.Errorf("node %s backs off without a failed pod deleted", node)
		}
	}
	if !s.InFlight.Empty() {
		for _, c := range p.Creates {
			if c.Reason == ReasonSurge {
				return fmt.Errorf("rollout surged on %s while writes are in flight", c.Node)
			}
		}
		for _, d := range p.Deletes {
			if d.Reason == ReasonUpdate {
				return fmt.Errorf("rollout deleted %s while writes are in flight", d.Pod.Name)
			}
		}
	}
	if len(p.Creates) > 0 && (p.Template == nil || p.Hash == "" || p.Template.Labels[HashLabel] != p.Hash) {
		return fmt.Errorf("creates without a labelled template")
	}
	if st := p.Status; st != nil {
		desired := int32(0)
		for _, n := range s.Nodes {
			if elig.Check(n).Run {
				desired++
			}
		}
		if st.DesiredNumberScheduled != desired || st.NumberUnavailable != st.DesiredNumberScheduled-st.NumberAvailable ||
			st.CurrentNumberScheduled > desired || st.NumberAvailable > st.NumberReady || st.NumberReady > st.CurrentNumberScheduled ||
			st.UpdatedNumberScheduled > st.CurrentNumberScheduled {
			return fmt.Errorf("inconsistent status %+v (desired %d)", st, desired)
		}
	}
	return nil
}

func setUID(m map[types.UID]bool, uid types.UID) map[types.UID]bool {
	if m == nil {
		m = map[types.UID]bool{}
	}
	m[uid] = true
	return m
}

func setNode(m map[string]bool, node string) map[string]bool {
	if m == nil {
		m = map[string]bool{}
	}
	m[node] = true
	return m
}
