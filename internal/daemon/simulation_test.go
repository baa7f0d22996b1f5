package daemon

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A rolling update played out on an in-memory cluster: Decide sees what a lagging
// cache would show, its Plan is applied, and the cluster moves on. New pods are bound
// and become Ready a step after they appear; deletes and creates may take a step to be
// observed, and deleted pods terminate for a step before they are gone. As in the
// controller, Decide runs only when something it watches changed or when the last
// Plan's RequeueAfter has passed: a rollout that waits for time alone must ask.

const simStep = 5 * time.Second

type simCluster struct {
	r        *rand.Rand
	ds       *apps.DaemonSet
	nodes    []*v1.Node
	pods     map[string]*v1.Pod // every pod that exists, by name
	hidden   map[string]bool    // created, not yet in the cache
	unseen   map[string]bool    // deleted, but the cache does not show it yet
	revs     []*apps.ControllerRevision
	now      time.Time
	step     int
	serial   int
	caps     [2]int
	budget   budget
	dirty    bool      // the cache changed since the last sync
	requeue  time.Time // when the last Plan asked to look again
	failRate float64   // chance that a new pod fails as it starts (early steps only)
	backoff  map[string]time.Time
	failures map[string]int
	eligible map[string]bool
	joining  map[string]bool // nodes that joined and have had no available pod yet
}

func newSimCluster(seed uint64) *simCluster {
	r := rand.New(rand.NewPCG(seed, 0xda3))
	c := &simCluster{r: r, pods: map[string]*v1.Pod{}, hidden: map[string]bool{}, unseen: map[string]bool{}, now: t0, eligible: map[string]bool{}, dirty: true}

	budgets := []dsOpt{
		withBudget("0", fmt.Sprint(1+r.IntN(4))), withBudget("", fmt.Sprintf("%d%%", 5+r.IntN(50))),
		withBudget(fmt.Sprint(1+r.IntN(3)), "0"), withBudget(fmt.Sprintf("%d%%", 5+r.IntN(50)), "0"),
		withBudget("0", "0"),
	}
	opts := []dsOpt{withNodeSelector("pool", "a"), budgets[r.IntN(len(budgets))], withMinReady(int32(r.IntN(3) * 10))}
	oldDS := newDS("ds", append(opts, withImage("img:v1"))...)
	c.ds = newDS("ds", append(opts, withImage("img:v2"))...)
	patch, _ := TemplatePatch(&oldDS.Spec.Template)
	c.revs = []*apps.ControllerRevision{revision(oldDS, "ds-v1", "v1", 1, patch)}

	for i := range 1 + r.IntN(15) {
		n := newNode(fmt.Sprintf("n%02d", i), withLabels("pool", "a"))
		switch r.IntN(8) {
		case 0:
			n.Labels["pool"] = "b" // not selected: never runs the pod
		case 1:
			n.Spec.Taints = []v1.Taint{{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}} // tolerated
		}
		c.nodes = append(c.nodes, n)
		if n.Labels["pool"] == "a" {
			c.eligible[n.Name] = true
			c.add(newPod(oldDS, "", n.Name, withHash("v1")))
		}
	}
	if r.IntN(3) == 0 {
		c.caps = [2]int{1 + r.IntN(3), 1 + r.IntN(3)}
	}
	if seed%3 == 0 {
		c.failRate, c.backoff, c.failures = 0.3, map[string]time.Time{}, map[string]int{}
	}
	c.budget, _ = rollingBudget(c.ds, len(c.eligible))
	return c
}

func (c *simCluster) add(pod *v1.Pod) {
	c.serial++
	pod.Name = fmt.Sprintf("pod-%03d", c.serial)
	pod.UID = types.UID("uid-" + pod.Name)
	pod.CreationTimestamp = metav1.NewTime(c.now)
	c.pods[pod.Name] = pod
}

// snapshot is what the controller's cache shows.
func (c *simCluster) snapshot() *Snapshot {
	s := &Snapshot{DaemonSet: c.ds, Nodes: c.nodes, Revisions: c.revs, Now: c.now, MaxCreates: c.caps[0], MaxDeletes: c.caps[1]}
	if len(c.backoff) > 0 {
		s.Backoff = make(map[string]time.Time, len(c.backoff))
		for node, until := range c.backoff {
			s.Backoff[node] = until
		}
	}
	for _, name := range c.sortedNames() {
		pod := c.pods[name]
		if c.hidden[name] {
			node, _ := TargetNode(pod)
			s.InFlight.Creates = setNode(s.InFlight.Creates, node)
			continue
		}
		if c.unseen[name] {
			s.InFlight.Deletes = setUID(s.InFlight.Deletes, pod.UID)
		}
		s.Pods = append(s.Pods, pod)
	}
	return s
}

func (c *simCluster) sortedNames() []string {
	var names []string
	for name := range c.pods {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// apply carries out a Plan the way the controller would, with random observation lag.
func (c *simCluster) apply(p Plan) {
	c.dirty = p.Status != nil || p.CreateRevision != nil // the DaemonSet's own update
	c.requeue = time.Time{}
	if p.RequeueAfter > 0 {
		c.requeue = c.now.Add(p.RequeueAfter)
	}
	if p.CreateRevision != nil {
		c.revs = append(c.revs, p.CreateRevision)
	}
	for _, m := range p.MarkRevisions {
		for i, r := range c.revs {
			if r.Name == m.Revision.Name {
				c.revs[i] = r.DeepCopy()
				if m.Remove {
					delete(c.revs[i].Annotations, m.Key)
				} else {
					metav1.SetMetaDataAnnotation(&c.revs[i].ObjectMeta, m.Key, m.Value)
				}
			}
		}
	}
	if p.Status != nil {
		c.ds = c.ds.DeepCopy()
		c.ds.Status = *p.Status
	}
	for _, node := range p.FailedPodNodes { // the controller's failed-pod backoff
		c.failures[node]++
		c.backoff[node] = c.now.Add(10 * time.Second << min(c.failures[node]-1, 3))
	}
	for _, d := range p.Deletes {
		if c.r.IntN(2) == 0 {
			c.unseen[d.Pod.Name] = true
		} else {
			c.terminate(d.Pod.Name)
		}
	}
	for _, cr := range p.Creates {
		tmpl := p.Template
		if cr.Template != nil {
			tmpl = cr.Template
		}
		pod := PodForNode(c.ds, tmpl, cr.Node)
		c.add(pod)
		if c.r.IntN(2) == 0 {
			c.hidden[pod.Name] = true
		}
	}
}

func (c *simCluster) terminate(name string) {
	pod := c.pods[name].DeepCopy()
	ts := metav1.NewTime(c.now)
	pod.DeletionTimestamp = &ts
	c.pods[name] = pod
}

// advance moves the cluster one step on: observations catch up, terminating pods go,
// and pods that appeared last step are bound and become Ready.
func (c *simCluster) advance() {
	c.now = c.now.Add(simStep)
	c.step++
	for _, name := range c.sortedNames() {
		pod := c.pods[name]
		c.dirty = c.dirty || c.hidden[name] || c.unseen[name] || pod.DeletionTimestamp != nil || pod.Spec.NodeName == ""
		switch {
		case c.hidden[name]:
			delete(c.hidden, name)
		case c.unseen[name]:
			delete(c.unseen, name)
			c.terminate(name)
		case pod.DeletionTimestamp != nil:
			delete(c.pods, name)
		case pod.Spec.NodeName == "":
			bound := pod.DeepCopy()
			bound.Spec.NodeName, _ = TargetNode(pod)
			bound.Status.Phase = v1.PodRunning
			readySince(c.now)(bound)
			if c.step < 30 && c.r.Float64() < c.failRate {
				failed()(bound)
			}
			c.pods[name] = bound
		}
	}
}

// alive are the pods on node that exist and have not been deleted.
func (c *simCluster) alive(node string) []*v1.Pod {
	var out []*v1.Pod
	for name, pod := range c.pods {
		if target, _ := TargetNode(pod); target == node && pod.DeletionTimestamp == nil && !c.unseen[name] {
			out = append(out, pod)
		}
	}
	return out
}

// check asserts the rollout's promises on the cluster as it really is.
func (c *simCluster) check() error {
	unavailable, doubled := 0, 0
	for _, n := range c.nodes {
		pods := c.alive(n.Name)
		if !c.eligible[n.Name] {
			if len(pods) > 0 {
				return fmt.Errorf("pod on unselected node %s", n.Name)
			}
			continue
		}
		switch {
		case slices.ContainsFunc(pods, func(p *v1.Pod) bool { return IsAvailable(p, c.ds.Spec.MinReadySeconds, c.now) }):
			delete(c.joining, n.Name)
		case !c.joining[n.Name]:
			unavailable++
		}
		switch {
		case len(pods) > 2, len(pods) == 2 && c.budget.maxSurge == 0:
			return fmt.Errorf("%d pods on %s", len(pods), n.Name)
		case len(pods) == 2:
			doubled++
		}
	}
	if unavailable > c.budget.maxUnavailable {
		return fmt.Errorf("%d nodes without an available pod, maxUnavailable %d", unavailable, c.budget.maxUnavailable)
	}
	if doubled > c.budget.maxSurge {
		return fmt.Errorf("%d nodes surging, maxSurge %d", doubled, c.budget.maxSurge)
	}
	return nil
}

func (c *simCluster) converged(hash string) bool {
	if len(c.hidden)+len(c.unseen) > 0 {
		return false
	}
	for name := range c.eligible {
		pods := c.alive(name)
		if len(pods) != 1 || pods[0].Labels[HashLabel] != hash || !IsAvailable(pods[0], c.ds.Spec.MinReadySeconds, c.now) {
			return false
		}
	}
	return true
}

// run syncs and advances the cluster until done, checking the rollout's promises, and
// extra's when given, at every step (extra gets the step's Plan, nil when there was no
// sync). It returns the current revision's hash.
func (c *simCluster) run(t *testing.T, desc string, done func(hash string) bool, extra func(*Plan) error) string {
	t.Helper()
	var hash string
	limit := c.step + 60 + 20*len(c.nodes)
	for finished := false; !finished; {
		if c.step > limit {
			t.Fatalf("%s: no convergence after %d steps", desc, c.step)
		}
		var plan *Plan
		if c.dirty || (!c.requeue.IsZero() && !c.now.Before(c.requeue)) {
			s := c.snapshot()
			p := Decide(s)
			if err := checkPlan(s, p); err != nil {
				t.Fatalf("%s, step %d: %v", desc, c.step, err)
			}
			hash = p.Hash
			c.apply(p)
			plan = &p
		} else if c.requeue.IsZero() && !done(hash) {
			t.Fatalf("%s, step %d: stalled: nothing changes and no look again is asked for", desc, c.step)
		}
		if err := c.check(); err != nil {
			t.Fatalf("%s, step %d: %v", desc, c.step, err)
		}
		if extra != nil {
			if err := extra(plan); err != nil {
				t.Fatalf("%s, step %d: %v", desc, c.step, err)
			}
		}
		finished = done(hash)
		c.advance()
	}
	return hash
}

// settle checks that a converged cluster is updated everywhere, that its status says
// so, and that nothing more is to be done. It returns the last Plan.
func (c *simCluster) settle(t *testing.T, desc, hash string) Plan {
	t.Helper()
	if hash != hashOf(c.ds) {
		t.Fatalf("%s: converged on %q, want the new template's %q", desc, hash, hashOf(c.ds))
	}
	c.now = c.now.Add(time.Minute)
	p := Decide(c.snapshot())
	want := int32(len(c.eligible))
	st := c.ds.Status
	if p.Status != nil {
		st = *p.Status
	}
	if len(p.Creates)+len(p.Deletes) != 0 || st.UpdatedNumberScheduled != want || st.NumberAvailable != want || st.DesiredNumberScheduled != want {
		t.Fatalf("%s: after convergence plan %v %v, status %+v", desc, createdOn(p), deletedNames(p), st)
	}
	return p
}

func TestRollingUpdateSimulation(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		c := newSimCluster(seed)
		desc := fmt.Sprintf("seed %d (%d selected nodes, %+v, minReady %ds, caps %v, failures %v)",
			seed, len(c.eligible), c.budget, c.ds.Spec.MinReadySeconds, c.caps, c.failRate > 0)
		hash := c.run(t, desc, c.converged, nil)
		c.settle(t, desc, hash)
	}
}
