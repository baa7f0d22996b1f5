package daemon

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// memoCluster is a cluster changed the way informer caches change: every change
// replaces an object with an edited copy.
type memoCluster struct {
	r       *rand.Rand
	s       *Snapshot
	nextPod int
	nextNod int
}

func newMemoCluster(seed uint64) *memoCluster {
	r := rand.New(rand.NewPCG(seed, 0x3e30))
	var opts []dsOpt
	if r.IntN(3) == 0 {
		opts = append(opts, withMinReady(5))
	}
	if r.IntN(3) == 0 {
		opts = append(opts, withNodeSelector("pool", "a"))
	}
	if r.IntN(3) == 0 {
		opts = append(opts, withBudget("1", "0"))
	}
	if r.IntN(4) == 0 {
		opts = append(opts, withOnDelete())
	}
	ds := newDS("agent", opts...)
	patch, err := TemplatePatch(&ds.Spec.Template)
	if err != nil {
		panic(err)
	}
	hash := hashOf(ds)
	c := &memoCluster{r: r, s: &Snapshot{DaemonSet: ds, Now: t0,
		Revisions: []*apps.ControllerRevision{newRevision(ds, ds.Name+"-"+hash, hash, patch, 1)},
		InFlight:  InFlight{Creates: map[string]bool{}, Deletes: map[types.UID]bool{}}}}
	if r.IntN(4) == 0 {
		c.s.MaxCreates, c.s.MaxDeletes = 2, 2
	}
	for range 3 + r.IntN(8) {
		c.addNode()
	}
	// A pod of someone else's in the namespace, which every decision ignores.
	c.s.Pods = append(c.s.Pods, newPod(newDS("other"), "other-0", "node-0"))
	return c
}

func (c *memoCluster) addNode() {
	name := fmt.Sprintf("node-%d", c.nextNod)
	c.nextNod++
	c.s.Nodes = append(c.s.Nodes, newNode(name, withLabels("pool", []string{"a", "b"}[c.r.IntN(2)])))
}

// apply carries out a Plan as the controller and the cluster would: pods created
// (sometimes not yet Ready), pods deleted, the status stored. A pod write may stay in
// flight (the cache has not shown it yet) until a later change lands it, and a
// deleted pod may linger while it terminates.
func (c *memoCluster) apply(p Plan) {
	ds := c.s.DaemonSet
	for _, cr := range p.Creates {
		if c.r.IntN(3) == 0 {
			c.s.InFlight.Creates[cr.Node] = true
			continue
		}
		c.addPod(cr.Node)
	}
	for _, a := range p.Adopt {
		i := slices.Index(c.s.Pods, a)
		pod := a.DeepCopy()
		pod.OwnerReferences = []metav1.OwnerReference{*ControllerRef(ds)}
		c.s.Pods[i] = pod
	}
	for _, d := range p.Deletes {
		switch c.r.IntN(4) {
		case 0:
			c.s.InFlight.Deletes[d.Pod.UID] = true
		case 1:
			// The pod may be a copy by now (adopted in this Plan).
			i := slices.IndexFunc(c.s.Pods, func(pod *v1.Pod) bool { return pod.UID == d.Pod.UID })
			c.s.Pods[i] = c.s.Pods[i].DeepCopy()
			terminating()(c.s.Pods[i])
		default:
			c.s.Pods = slices.DeleteFunc(c.s.Pods, func(pod *v1.Pod) bool { return pod.UID == d.Pod.UID })
		}
	}
	if p.Status != nil {
		next := ds.DeepCopy()
		next.Status = *p.Status
		c.s.DaemonSet = next
	}
}

// addPod adds a pod of the DaemonSet on node, sometimes not yet Ready.
func (c *memoCluster) addPod(node string) {
	c.nextPod++
	opts := []podOpt{readySince(c.s.Now)}
	if c.r.IntN(3) == 0 {
		opts = []podOpt{notReady()}
	}
	c.s.Pods = append(c.s.Pods, newPod(c.s.DaemonSet, fmt.Sprintf("agent-%d", c.nextPod), node, opts...))
}

// land ends one write in flight: the cache shows it, shows it before the controller
// notices (a deleted pod gone while its delete is still listed), or the controller
// stops waiting for it.
func (c *memoCluster) land() string {
	f := c.s.InFlight
	for node := range f.Creates {
		delete(f.Creates, node)
		if c.r.IntN(4) == 0 {
			return "create on " + node + " forgotten"
		}
		c.addPod(node)
		return "create on " + node + " landed"
	}
	for uid := range f.Deletes {
		switch c.r.IntN(4) {
		case 0:
			delete(f.Deletes, uid)
			return "delete of " + string(uid) + " forgotten"
		case 1:
			c.s.Pods = slices.DeleteFunc(c.s.Pods, func(pod *v1.Pod) bool { return pod.UID == uid })
			return "pod " + string(uid) + " gone, its delete still in flight"
		}
		delete(f.Deletes, uid)
		c.s.Pods = slices.DeleteFunc(c.s.Pods, func(pod *v1.Pod) bool { return pod.UID == uid })
		return "delete of " + string(uid) + " landed"
	}
	return "no write in flight"
}

// change makes one random change and says what it was.
func (c *memoCluster) change() string {
	s := c.s
	pick := func(n int) int { return c.r.IntN(n) }
	switch k := pick(13); {
	case k == 0 && len(s.Pods) > 0: // readiness flips
		i := pick(len(s.Pods))
		pod := s.Pods[i].DeepCopy()
		if IsReady(pod) {
			notReady()(pod)
		} else {
			readySince(s.Now.Add(-time.Duration(pick(10)) * time.Second))(pod)
		}
		s.Pods[i] = pod
		return "pod " + pod.Name + " readiness flipped"
	case k == 1 && len(s.Pods) > 0: // an update that changes nothing the rules read
		i := pick(len(s.Pods))
		pod := s.Pods[i].DeepCopy()
		pod.ResourceVersion += "1"
		s.Pods[i] = pod
		return "pod " + pod.Name + " rewritten"
	case k == 2:
		i := pick(len(s.Nodes))
		node := s.Nodes[i].DeepCopy()
		node.Labels["pool"] = []string{"a", "b"}[pick(2)]
		s.Nodes[i] = node
		return "node " + node.Name + " relabelled"
	case k == 3:
		i := pick(len(s.Nodes))
		node := s.Nodes[i].DeepCopy()
		if len(node.Spec.Taints) > 0 {
			node.Spec.Taints = nil
		} else {
			withTaint("maintenance", []v1.TaintEffect{v1.TaintEffectNoSchedule, v1.TaintEffectNoExecute}[pick(2)])(node)
		}
		s.Nodes[i] = node
		return "node " + node.Name + " taints changed"
	case k == 4:
		c.addNode()
		return "node added"
	case k == 5 && len(s.Nodes) > 1:
		i := pick(len(s.Nodes))
		name := s.Nodes[i].Name
		s.Nodes = slices.Delete(s.Nodes, i, i+1)
		return "node " + name + " deleted"
	case k == 6 && len(s.Pods) > 0:
		i := pick(len(s.Pods))
		name := s.Pods[i].Name
		s.Pods = slices.Delete(s.Pods, i, i+1)
		return "pod " + name + " deleted"
	case k == 7:
		s.Now = s.Now.Add(time.Duration(pick(4)) * time.Second)
		return "time passed"
	case k == 8 && len(s.Pods) > 0:
		i := pick(len(s.Pods))
		pod := s.Pods[i].DeepCopy()
		pod.Status.Phase = []v1.PodPhase{v1.PodFailed, v1.PodSucceeded}[pick(2)]
		s.Pods[i] = pod
		return "pod " + pod.Name + " finished"
	case k >= 9 && k < 12 && !s.InFlight.Empty():
		return c.land()
	case k == 12: // a new generation whose template is the same
		ds := s.DaemonSet.DeepCopy()
		ds.Generation++
		ds.Spec.RevisionHistoryLimit = new(int32)
		*ds.Spec.RevisionHistoryLimit = int32(5 + pick(5))
		s.DaemonSet = ds
		return "DaemonSet at generation " + fmt.Sprint(ds.Generation)
	default:
		node := s.Nodes[pick(len(s.Nodes))].Name
		c.nextPod++
		pod := newPod(s.DaemonSet, fmt.Sprintf("stray-%d", c.nextPod), node, orphan())
		pod.UID = types.UID(fmt.Sprintf("uid-stray-%d", c.nextPod))
		s.Pods = append(s.Pods, pod)
		return "orphan pod added on " + node
	}
}

var planCmp = []cmp.Option{
	cmpopts.EquateEmpty(),
	cmp.AllowUnexported(Plan{}, PodCreate{}, PodDelete{}),
	cmp.Comparer(func(a, b *v1.Pod) bool { return a == b }),
	cmp.Comparer(func(a, b *apps.ControllerRevision) bool { return a == b }),
	cmp.Comparer(func(a, b *v1.PodTemplateSpec) bool { return (a == nil) == (b == nil) }),
}

// Over random histories of a cluster, DecideWith with the Memo it keeps makes exactly
// the Plan Decide makes, and takes the short way often.
func TestDecideWithMemoMatchesDecide(t *testing.T) {
	fast, afterChange, withWrites, total := 0, 0, 0, 0
	for seed := uint64(1); seed <= 200; seed++ {
		c := newMemoCluster(seed)
		var m *Memo
		var log []string
		changed := false
		for step := range 120 {
			prev := m
			got, next := DecideWith(c.s, m)
			want := Decide(c.s)
			if diff := cmp.Diff(want, got, planCmp...); diff != "" {
				t.Fatalf("seed %d step %d, after %v:\nDecideWith differs from Decide (-want +got):\n%s", seed, step, log, diff)
			}
			total++
			if prev != nil && next == prev {
				fast++
				if changed {
					afterChange++
				}
				if len(got.Creates)+len(got.Deletes) > 0 || !c.s.InFlight.Empty() {
					withWrites++
				}
			}
			m = next
			c.apply(got)
			// One step in three changes something; time goes on, so pods come out of
			// minReadySeconds and many steps start from a settled DaemonSet.
			c.s.Now = c.s.Now.Add(time.Second)
			if changed = c.r.IntN(3) == 0; changed {
				log = append(log, c.change())
			}
		}
	}
	t.Logf("%d of %d decisions taken from the memo, %d of them right after a change, %d with pod writes to make or in flight",
		fast, total, afterChange, withWrites)
	if fast < total/6 || afterChange < fast/10 || withWrites < fast/20 {
		t.Errorf("only %d of %d decisions used the memo (%d after a change, %d with pod writes); the simulation no longer exercises it",
			fast, total, afterChange, withWrites)
	}
}

// cacheLog plays a caller that counts its caches' changes: it names, by identity,
// the nodes and pods that differ from those of the snapshot it last saw, and now
// and then a few that did not change (Changes may name more than changed).
//
// It numbers the writes in flight likewise: the nodes and pods whose write started or
// ended since the last snapshot's, and now and then one that did not.
type cacheLog struct {
	at    Position
	nodes map[string]*v1.Node
	pods  map[types.UID]*v1.Pod

	inflightAt uint64
	creates    map[string]bool
	deletes    map[types.UID]bool
}

func (l *cacheLog) record(s *Snapshot, r *rand.Rand) {
	nodes := make(map[string]*v1.Node, len(s.Nodes))
	for _, n := range s.Nodes {
		nodes[n.Name] = n
	}
	pods := make(map[types.UID]*v1.Pod, len(s.Pods))
	for _, p := range s.Pods {
		pods[p.UID] = p
	}
	ch := &Changes{From: l.at, Nodes: map[string]*v1.Node{}, Pods: map[types.UID]*v1.Pod{}}
	for name, n := range nodes {
		if l.nodes[name] != n || r.IntN(10) == 0 {
			ch.Nodes[name] = n
		}
	}
	for name := range l.nodes {
		if nodes[name] == nil {
			ch.Nodes[name] = nil
		}
	}
	for uid, p := range pods {
		if l.pods[uid] != p || r.IntN(10) == 0 {
			ch.Pods[uid] = p
		}
	}
	for uid := range l.pods {
		if pods[uid] == nil {
			ch.Pods[uid] = nil
		}
	}
	l.at = Position{Nodes: l.at.Nodes + 1, Pods: l.at.Pods + 1}
	l.nodes, l.pods = nodes, pods
	s.At, s.Changes = l.at, ch

	f := &s.InFlight
	fc := &InFlightChanges{Since: l.inflightAt}
	for _, name := range changedKeys(l.creates, f.Creates, r) {
		fc.Creates = append(fc.Creates, name)
	}
	for _, uid := range changedKeys(l.deletes, f.Deletes, r) {
		fc.Deletes = append(fc.Deletes, uid)
	}
	l.inflightAt++
	l.creates, l.deletes = maps.Clone(f.Creates), maps.Clone(f.Deletes)
	f.At, f.Changes = l.inflightAt, fc
}

// changedKeys returns the keys in exactly one of before and now, and now and then
// one in both.
func changedKeys[K comparable](before, now map[K]bool, r *rand.Rand) []K {
	var out []K
	for k := range now {
		if !before[k] || r.IntN(10) == 0 {
			out = append(out, k)
		}
	}
	for k := range before {
		if !now[k] {
			out = append(out, k)
		}
	}
	return out
}

// Over the same random histories, a Memo given the changes since its snapshot makes
// the Plan Decide makes too, and takes the short way as often as one that compares
// everything.
func TestDecideWithMemoChangesMatchesDecide(t *testing.T) {
	fast, fromChanges, byInflightChanges, total := 0, 0, 0, 0
	for seed := uint64(1); seed <= 200; seed++ {
		c := newMemoCluster(seed)
		var m *Memo
		var log []string
		var cl cacheLog
		for step := range 120 {
			cl.record(c.s, c.r)
			if c.r.IntN(20) == 0 {
				c.s.Changes.From.Nodes-- // a log the caller could not keep: everything is compared
			}
			switch c.r.IntN(20) {
			case 0:
				c.s.InFlight.Changes.Since-- // writes numbered apart from the memo's
			case 1:
				c.s.InFlight.Changes = nil
			}
			if m != nil && m.inflightChanges(c.s.InFlight) != nil {
				byInflightChanges++
			}
			prev := m
			var got Plan
			var next *Memo
			if listless := *c.s; m != nil && c.r.IntN(2) == 0 {
				// As the controller does: from the memo and the changes alone, the
				// lists left out, and the full decision when that cannot be trusted.
				listless.Nodes, listless.Pods = nil, nil
				var ok bool
				if got, ok = DecideFromMemo(&listless, m); ok {
					next = m
					fromChanges++
				} else {
					got, next = DecideWith(c.s, nil)
				}
			} else {
				got, next = DecideWith(c.s, m)
			}
			want := Decide(c.s)
			if diff := cmp.Diff(want, got, planCmp...); diff != "" {
				t.Fatalf("seed %d step %d, after %v:\nDecideWith with changes differs from Decide (-want +got):\n%s", seed, step, log, diff)
			}
			total++
			if prev != nil && next == prev {
				fast++
			}
			m = next
			c.apply(got)
			c.s.Now = c.s.Now.Add(time.Second)
			if c.r.IntN(3) == 0 {
				log = append(log, c.change())
			}
		}
	}
	t.Logf("%d of %d decisions taken from the memo, %d of them by DecideFromMemo without the lists; %d offered the memo the writes in flight that changed",
		fast, total, fromChanges, byInflightChanges)
	if fast < total/6 || fromChanges < fast/4 || byInflightChanges < fast/2 {
		t.Errorf("only %d of %d decisions used the memo, %d without the lists, %d offered the changed writes in flight; the simulation no longer exercises it",
			fast, total, fromChanges, byInflightChanges)
	}
}

// A memo is not kept across a change of the DaemonSet itself.
func TestDecideWithMemoDropsOnDaemonSetChange(t *testing.T) {
	c := newMemoCluster(7)
	var m *Memo
	for range 5 {
		var p Plan
		p, m = DecideWith(c.s, m)
		c.apply(p)
	}
	if m == nil {
		t.Fatal("a settled DaemonSet left no memo")
	}
	// A status write that did not happen leaves the condition of a removed policy.
	stale := c.s.DaemonSet.DeepCopy()
	withProgressing(ReasonPaused, v1.ConditionUnknown, t0)(stale)
	withStale := *c.s
	withStale.DaemonSet = stale
	if got, want := mustDecideWith(t, &withStale, m), Decide(&withStale); !cmp.Equal(want, got, planCmp...) {
		t.Errorf("with a stale Progressing condition: %s", cmp.Diff(want, got, planCmp...))
	}
	ds := c.s.DaemonSet.DeepCopy()
	ds.Generation++
	ds.Spec.Template.Spec.Containers[0].Image = "img:v2"
	c.s.DaemonSet = ds
	p, next := DecideWith(c.s, m)
	if next == m {
		t.Error("the memo survived a new generation")
	}
	if p.CreateRevision == nil {
		t.Errorf("a new template made no revision: %+v", p)
	}
	ds = c.s.DaemonSet.DeepCopy()
	ds.Annotations = map[string]string{AnnotationPaused: "true"}
	c.s.DaemonSet = ds
	if _, again := DecideWith(c.s, next); again != nil && again == next {
		t.Error("the memo survived an annotation change")
	}
	ds = c.s.DaemonSet.DeepCopy()
	now := metav1.Now()
	ds.DeletionTimestamp = &now
	c.s.DaemonSet = ds
	if p, _ := DecideWith(c.s, m); p.Writes() != 0 {
		t.Errorf("a DaemonSet being deleted got writes: %+v", p)
	}
}

// A memo looks at every node with a write in flight, including writes it did not
// plan: a delete in flight for a pod of a surging DaemonSet makes room for its
// replacement at once, and holds back the observed generation.
func TestDecideWithMemoSeesEveryWriteInFlight(t *testing.T) {
	ds := newDS("agent", withBudget("1", "0"))
	s := snap(ds, nodes("node-a", "node-b", "node-c"),
		newPod(ds, "agent-a", "node-a"), newPod(ds, "agent-b", "node-b"), newPod(ds, "agent-c", "node-c"))
	patch, err := TemplatePatch(&ds.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	s.Revisions = []*apps.ControllerRevision{newRevision(ds, ds.Name+"-"+hashOf(ds), hashOf(ds), patch, 1)}
	p, m := DecideWith(s, nil)
	if p.Status == nil || m == nil {
		t.Fatalf("a settled DaemonSet got no status (%v) or no memo (%v)", p.Status, m)
	}
	next := *s
	next.DaemonSet = ds.DeepCopy()
	next.DaemonSet.Status = *p.Status
	next.DaemonSet.Generation++
	next.InFlight = InFlight{Deletes: map[types.UID]bool{s.Pods[1].UID: true}}
	want := Decide(&next)
	if !sameStrings(createdOn(want), []string{"node-b"}) || want.Status != nil {
		t.Fatalf("the full decision is not what this test is about: %+v", want)
	}
	// The generation changed: this memo is dropped, and the next one, made with a
	// delete in flight, must see one in flight elsewhere.
	_, m = DecideWith(&next, m)
	if m == nil {
		t.Fatal("no memo for a DaemonSet with a delete in flight")
	}
	next.InFlight = InFlight{Deletes: map[types.UID]bool{s.Pods[2].UID: true}}
	got, _ := DecideWith(&next, m)
	if want := Decide(&next); !cmp.Equal(want, got, planCmp...) {
		t.Errorf("with a delete in flight the memo did not plan: %s", cmp.Diff(want, got, planCmp...))
	}
}

// A memo given the writes in flight that changed (InFlight.Changes) looks at those
// nodes alone, and keeps count of them: a delete that ends unseen (it failed) is
// planned again, after a decision that saw it start.
func TestDecideWithMemoFollowsNamedWritesInFlight(t *testing.T) {
	ds := newDS("agent", withNodeSelector("pool", "a"))
	s := snap(ds, []*v1.Node{newNode("node-a", withLabels("pool", "a")), newNode("node-b", withLabels("pool", "b"))},
		newPod(ds, "agent-a", "node-a"), newPod(ds, "agent-b", "node-b"))
	patch, err := TemplatePatch(&ds.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	s.Revisions = []*apps.ControllerRevision{newRevision(ds, ds.Name+"-"+hashOf(ds), hashOf(ds), patch, 1)}
	misplaced := s.Pods[1].UID
	s.InFlight = InFlight{At: 1}
	p, m := DecideWith(s, nil)
	if len(p.Deletes) != 1 || p.Deletes[0].Pod.UID != misplaced || m == nil {
		t.Fatalf("the full decision is not what this test is about: %+v (memo %v)", p, m != nil)
	}
	for i, f := range []InFlight{
		{Deletes: map[types.UID]bool{misplaced: true}, At: 2, Changes: &InFlightChanges{Since: 1, Deletes: []types.UID{misplaced}}},
		{At: 3, Changes: &InFlightChanges{Since: 2, Deletes: []types.UID{misplaced}}},
		{At: 4, Changes: &InFlightChanges{Since: 3}},
	} {
		s.InFlight = f
		got, next := DecideWith(s, m)
		if want := Decide(s); !cmp.Equal(want, got, planCmp...) {
			t.Fatalf("step %d: %s", i, cmp.Diff(want, got, planCmp...))
		}
		if next != m {
			t.Fatalf("step %d: the memo was dropped", i)
		}
	}
}

func mustDecideWith(t *testing.T, s *Snapshot, m *Memo) Plan {
	t.Helper()
	p, _ := DecideWith(s, m)
	return p
}

// servedSnapshot is a snapshot of DaemonSet agent, its revision stored, with a pod
// long Ready on each of the first served nodes of ns.
func servedSnapshot(t *testing.T, ns []*v1.Node, served int) *Snapshot {
	t.Helper()
	ds := newDS("agent")
	s := snap(ds, ns)
	patch, err := TemplatePatch(&ds.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	hash := hashOf(ds)
	s.Revisions = []*apps.ControllerRevision{newRevision(ds, ds.Name+"-"+hash, hash, patch, 1)}
	for i, n := range ns[:served] {
		s.Pods = append(s.Pods, newPod(ds, fmt.Sprintf("agent-%d", i), n.Name, readySince(t0.Add(-time.Hour))))
	}
	return s
}

// Looked counts the nodes a decision from the memo looked at again: none on a
// settled DaemonSet with nothing new, one when one node's object is new, and the
// node whose pod was created meanwhile.
func TestMemoLooked(t *testing.T) {
	s := servedSnapshot(t, nodes("a", "b", "c", "d"), 3)
	ds := s.DaemonSet
	p, m := DecideWith(s, nil)
	if m == nil || len(p.Creates) != 1 {
		t.Fatalf("first decision: memo %v, creates %v; want a memo and d's create", m != nil, p.Creates)
	}
	s.Pods = append(s.Pods, newPod(ds, "agent-3", "d", readySince(t0.Add(-time.Hour))))
	_, next := DecideWith(s, m)
	if next != m || m.Looked() != 1 {
		t.Fatalf("after d's pod came: memo kept %v, looked at %d nodes; want kept, 1", next == m, m.Looked())
	}
	if _, next = DecideWith(s, m); next != m || m.Looked() != 0 {
		t.Errorf("with nothing new: memo kept %v, looked at %d nodes; want kept, 0", next == m, m.Looked())
	}
	s.Nodes = slices.Clone(s.Nodes)
	s.Nodes[1] = s.Nodes[1].DeepCopy()
	if _, next = DecideWith(s, m); next != m || m.Looked() != 1 {
		t.Errorf("with b's node object new: memo kept %v, looked at %d nodes; want kept, 1", next == m, m.Looked())
	}
	if (*Memo)(nil).Looked() != 0 {
		t.Error("no memo looked at nodes")
	}
}

// A node whose pod is on its way out is looked at while its delete is in flight and
// when the pod object changes, not at every decision while the pod terminates.
func TestMemoLookedWhilePodTerminates(t *testing.T) {
	s := servedSnapshot(t, nodes("a", "b", "c"), 3)
	_, m := DecideWith(s, nil)
	if m == nil {
		t.Fatal("no memo for a settled DaemonSet")
	}
	step := func(what string, wantDeletes, wantLooked int) {
		t.Helper()
		p, next := DecideWith(s, m)
		if next != m || len(p.Deletes) != wantDeletes || m.Looked() != wantLooked {
			t.Errorf("%s: memo kept %v, %d deletes, looked at %d nodes; want kept, %d deletes, %d nodes",
				what, next == m, len(p.Deletes), m.Looked(), wantDeletes, wantLooked)
		}
	}
	s.Nodes = slices.Clone(s.Nodes)
	s.Nodes[2] = s.Nodes[2].DeepCopy()
	withTaint("maintenance", v1.TaintEffectNoExecute)(s.Nodes[2])
	step("c tainted NoExecute", 1, 1)

	pod := s.Pods[2]
	s.InFlight = InFlight{Deletes: map[types.UID]bool{pod.UID: true}}
	step("the delete in flight", 0, 1)

	s.InFlight = InFlight{}
	s.Pods = slices.Clone(s.Pods)
	s.Pods[2] = pod.DeepCopy()
	terminating()(s.Pods[2])
	step("the cache shows the pod terminating", 0, 1)
	step("the pod still terminating, nothing new", 0, 0)

	s.Pods = slices.Clone(s.Pods)
	s.Pods[2] = s.Pods[2].DeepCopy()
	s.Pods[2].Status.Phase = v1.PodSucceeded
	step("the kubelet finished the pod", 0, 1)
	step("the pod finished, nothing new", 0, 0)
	if _, fresh := DecideWith(s, nil); fresh == nil {
		t.Error("no new memo beside a finished pod on its way out")
	}

	s.Pods = s.Pods[:2]
	step("the finished pod gone (its node was looked at when it finished)", 0, 0)

	// A finished pod of an older template keeps its revision until it is gone: the
	// full decision, which may prune that revision then, takes over.
	old := s.Pods[1].DeepCopy()
	old.UID, old.Name = "uid-old", "agent-old"
	old.Labels = maps.Clone(old.Labels)
	old.Labels[HashLabel] = "older"
	old.Status.Phase = v1.PodFailed
	terminating()(old)
	s.Pods = append(slices.Clone(s.Pods), old)
	if _, next := DecideWith(s, m); next == m {
		t.Error("the memo kept beside a finished pod of an older template")
	}
	if _, fresh := DecideWith(s, nil); fresh != nil {
		t.Error("a new memo beside a finished pod of an older template")
	}
}

// A delete in flight for a pod the memo no longer holds — the cache shows the pod
// gone, or finished and marked for deletion, before the delete's end is recorded —
// changes nothing the full decision places: the memo keeps deciding, and plans what
// Decide plans.
func TestMemoKeepsDecidingWithADeleteInFlightForAPodItDoesNotHold(t *testing.T) {
	for _, tc := range []struct {
		name string
		seen func(s *Snapshot, pod *v1.Pod) // what the cache shows of pod
	}{
		{"the pod gone", func(s *Snapshot, _ *v1.Pod) { s.Pods = s.Pods[:2] }},
		{"the pod finished and marked for deletion", func(s *Snapshot, pod *v1.Pod) {
			finished := pod.DeepCopy()
			finished.Status.Phase = v1.PodSucceeded
			terminating()(finished)
			s.Pods = append(slices.Clone(s.Pods[:2]), finished)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := servedSnapshot(t, nodes("a", "b", "c"), 3)
			_, m := DecideWith(s, nil)
			if m == nil {
				t.Fatal("no memo for a settled DaemonSet")
			}
			s.Nodes = slices.Clone(s.Nodes)
			s.Nodes[2] = s.Nodes[2].DeepCopy()
			withTaint("maintenance", v1.TaintEffectNoExecute)(s.Nodes[2])
			if p := mustDecideWith(t, s, m); len(p.Deletes) != 1 {
				t.Fatalf("the tainted node's pod is not deleted: %+v", p)
			}
			pod := s.Pods[2]
			s.InFlight = InFlight{Deletes: map[types.UID]bool{pod.UID: true}}
			tc.seen(s, pod)
			got, next := DecideWith(s, m)
			if want := Decide(s); !cmp.Equal(want, got, planCmp...) {
				t.Errorf("the memo's plan differs from Decide's: %s", cmp.Diff(want, got, planCmp...))
			}
			if next != m {
				t.Error("the memo was dropped")
			}
		})
	}
}
