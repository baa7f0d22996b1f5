package bench

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/everynode/everynode/internal/nodesim"
)

// scenario is one workload. prepare, if set, runs before the controller starts;
// run with it running, and records the scenario's metrics.
type scenario struct {
	name, title string
	nodes       int
	prepare     func(r *runCtx) error
	run         func(r *runCtx) error
}

// ScenarioNames are the scenarios, in the order they run.
func ScenarioNames() []string {
	return []string{"create", "create-5", "rolling", "surge", "churn", "steady", "big-cluster"}
}

func scenarioByName(name string, o Options) scenario {
	switch name {
	case "create":
		return coldCreate(name, o.Nodes, 1)
	case "create-5":
		return coldCreate(name, o.Nodes, 5)
	case "rolling":
		ten := intstr.FromString("10%")
		zero := intstr.FromInt32(0)
		return rollingUpdate(name, o.Nodes, "maxUnavailable=10%", apps.RollingUpdateDaemonSet{MaxUnavailable: &ten, MaxSurge: &zero})
	case "surge":
		ten := intstr.FromString("10%")
		zero := intstr.FromInt32(0)
		return rollingUpdate(name, o.Nodes, "maxSurge=10%", apps.RollingUpdateDaemonSet{MaxUnavailable: &zero, MaxSurge: &ten})
	case "churn":
		return nodeChurn(name, o)
	case "steady":
		return steadyState(name, o)
	case "big-cluster":
		return bigCluster(name, o)
	}
	panic("unknown scenario " + name)
}

// tail is how long the costs of a phase keep being counted after it converged, so
// that writes which trail convergence (a last status update) are charged to it.
const tail = 3 * time.Second

// settle is the pause before a measured phase starts, so that it does not pay for
// what the phase before left trailing.
const settle = 3 * time.Second

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// createDaemonSets creates count DaemonSets (ds-0 …) meant for every one of nodes
// and returns what each must converge to.
func (r *runCtx) createDaemonSets(count, nodes int) (map[string]dsWant, error) {
	wants := map[string]dsWant{}
	for i := range count {
		ds, err := r.createDaemonSet(daemonSet(fmt.Sprintf("ds-%d", i)))
		if err != nil {
			return nil, err
		}
		wants[ds.Name] = dsWant{MinGeneration: ds.Generation, Desired: int32(nodes), Available: int32(nodes)}
	}
	return wants, nil
}

func (r *runCtx) createDaemonSet(ds *apps.DaemonSet) (*apps.DaemonSet, error) {
	out, err := r.sb.Client.AppsV1().DaemonSets(Namespace).Create(r.ctx, ds, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating DaemonSet %s: %w", ds.Name, err)
	}
	return out, nil
}

// coldCreate creates count DaemonSets at once onto every node and measures until
// all have converged.
func coldCreate(name string, nodes, count int) scenario {
	title := fmt.Sprintf("cold create: 1 DaemonSet × %d nodes", nodes)
	if count > 1 {
		title = fmt.Sprintf("cold create: %d DaemonSets at once × %d nodes", count, nodes)
	}
	return scenario{name: name, title: title, nodes: nodes, run: func(r *runCtx) error {
		p := r.begin()
		wants, err := r.createDaemonSets(count, nodes)
		if err != nil {
			return err
		}
		at, err := r.w.waitConverged(r.ctx, wants, r.ctrl, r.o.Timeout)
		if err != nil {
			r.addCosts("", r.end(p))
			return err
		}
		r.logf("converged in %v", at.Sub(p.start).Round(10*time.Millisecond))
		if err := sleep(r.ctx, tail); err != nil {
			return err
		}
		pr := r.endAt(p, at)
		r.addConverge("", pr.elapsed, count*nodes)
		r.addCosts("", pr)
		return nil
	}}
}

// rollingUpdate creates a DaemonSet with the given rolling update budget, waits
// for it, then changes its image and measures the update until it has converged.
func rollingUpdate(name string, nodes int, budget string, strategy apps.RollingUpdateDaemonSet) scenario {
	return scenario{name: name, title: fmt.Sprintf("rolling update, %s × %d nodes", budget, nodes), nodes: nodes, run: func(r *runCtx) error {
		ds := daemonSet("ds-0")
		ds.Spec.UpdateStrategy.RollingUpdate = &strategy
		t0 := time.Now()
		created, err := r.createDaemonSet(ds)
		if err != nil {
			return err
		}
		n := int32(nodes)
		at, err := r.w.waitConverged(r.ctx, map[string]dsWant{ds.Name: {created.Generation, n, n}}, r.ctrl, r.o.Timeout)
		if err != nil {
			return fmt.Errorf("creating: %w", err)
		}
		r.add(Metric{Name: "create: converge (s)", Unit: Seconds, Value: at.Sub(t0).Seconds()})
		r.logf("created in %v", at.Sub(t0).Round(10*time.Millisecond))
		if err := sleep(r.ctx, settle); err != nil {
			return err
		}
		p := r.begin()
		var gen int64
		err = retryConflict(r.ctx, func(ctx context.Context) error {
			cur, err := r.sb.Client.AppsV1().DaemonSets(Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec.Template.Spec.Containers[0].Image = imageSecond
			out, err := r.sb.Client.AppsV1().DaemonSets(Namespace).Update(ctx, cur, metav1.UpdateOptions{})
			if err == nil {
				gen = out.Generation
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("changing the image: %w", err)
		}
		at, err = r.w.waitConverged(r.ctx, map[string]dsWant{ds.Name: {gen, n, n}}, r.ctrl, r.o.Timeout)
		if err != nil {
			r.addCosts("update: ", r.end(p))
			return fmt.Errorf("updating: %w", err)
		}
		r.logf("updated in %v", at.Sub(p.start).Round(10*time.Millisecond))
		if err := sleep(r.ctx, tail); err != nil {
			return err
		}
		pr := r.endAt(p, at)
		r.addConverge("update: ", pr.elapsed, nodes)
		r.addCosts("update: ", pr)
		return nil
	}}
}

// retryConflict runs do until it does not fail with a conflict.
func retryConflict(ctx context.Context, do func(context.Context) error) error {
	for {
		err := do(ctx)
		if !apierrors.IsConflict(err) {
			return err
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
}

// pools is how many node pools the churn scenario's node selectors choose from.
const pools = 10

func poolName(i int) string { return "p" + strconv.Itoa(i%pools) }

// churnDaemonSets are the churn scenario's DaemonSets: n with a node selector on a
// pool each (pools in turn), and one with six NotIn node affinity expressions that
// match every node outside the last two pools.
func churnDaemonSets(n int) []*apps.DaemonSet {
	var out []*apps.DaemonSet
	for i := range n {
		ds := daemonSet(fmt.Sprintf("pool-%d", i))
		ds.Spec.Template.Spec.NodeSelector = map[string]string{labelPool: poolName(i)}
		out = append(out, ds)
	}
	ds := daemonSet("not-in")
	ds.Spec.Template.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchExpressions: []v1.NodeSelectorRequirement{
				{Key: labelPool, Operator: v1.NodeSelectorOpNotIn, Values: []string{poolName(pools - 2), poolName(pools - 1)}},
				{Key: labelRev, Operator: v1.NodeSelectorOpNotIn, Values: []string{"excluded"}},
				{Key: "kubernetes.io/os", Operator: v1.NodeSelectorOpNotIn, Values: []string{"windows"}},
				{Key: "node.kubernetes.io/instance-type", Operator: v1.NodeSelectorOpNotIn, Values: []string{"bench-excluded"}},
				{Key: "bench.everynode.dev/dedicated", Operator: v1.NodeSelectorOpNotIn, Values: []string{"gpu", "storage"}},
				{Key: "topology.kubernetes.io/zone", Operator: v1.NodeSelectorOpNotIn, Values: []string{"bench-excluded-a", "bench-excluded-b"}},
			},
		}}},
	}}
	return append(out, ds)
}

// wantsFor is what every DaemonSet must show once the controller has caught up with
// the nodes as the API server has them now.
func (r *runCtx) wantsFor(daemonSets []*apps.DaemonSet) (map[string]dsWant, []*v1.Node, error) {
	list, err := r.sb.Client.CoreV1().Nodes().List(r.ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	nodes := make([]*v1.Node, len(list.Items))
	for i := range list.Items {
		nodes[i] = &list.Items[i]
	}
	wants := map[string]dsWant{}
	for _, ds := range daemonSets {
		n := expectedDesired(ds, nodes)
		wants[ds.Name] = dsWant{MinGeneration: ds.Generation, Desired: n, Available: n}
	}
	return wants, nodes, nil
}

// nodeChurn labels M nodes into pools, creates the churn DaemonSets, then changes
// labels and taints of nodes at a steady rate, and finally adds nodes at once.
func nodeChurn(name string, o Options) scenario {
	m := o.ChurnNodes
	title := fmt.Sprintf("node churn: %d nodes, %d DaemonSets with node selectors + 1 NotIn affinity; %d node changes/s for %v, then %d nodes added",
		m, o.ChurnDaemonSets, o.ChurnRate, o.ChurnDuration, o.ChurnAddNodes)
	return scenario{name: name, title: title, nodes: m,
		prepare: func(r *runCtx) error {
			return parallel(r.ctx, m, 16, func(ctx context.Context, i int) error {
				patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, labelPool, poolName(i))
				_, err := r.sb.Client.CoreV1().Nodes().Patch(ctx, nodesim.NodeNamePrefix+strconv.Itoa(i), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
				return err
			})
		},
		run: func(r *runCtx) error {
			// Setup: every DaemonSet at once.
			var daemonSets []*apps.DaemonSet
			t0 := time.Now()
			for _, ds := range churnDaemonSets(o.ChurnDaemonSets) {
				out, err := r.createDaemonSet(ds)
				if err != nil {
					return err
				}
				daemonSets = append(daemonSets, out)
			}
			wants, _, err := r.wantsFor(daemonSets)
			if err != nil {
				return err
			}
			pods := 0
			for _, w := range wants {
				pods += int(w.Desired)
			}
			at, err := r.w.waitConverged(r.ctx, wants, r.ctrl, r.o.Timeout)
			if err != nil {
				return fmt.Errorf("setting up: %w", err)
			}
			r.logf("set up %d pods in %v", pods, at.Sub(t0).Round(10*time.Millisecond))
			r.addConverge("setup: ", at.Sub(t0), pods)
			if err := sleep(r.ctx, settle); err != nil {
				return err
			}

			// Churn.
			p := r.begin()
			events, err := r.churn(m)
			if err != nil {
				r.addCosts("churn: ", r.end(p))
				return err
			}
			churnEnd := time.Now()
			r.logf("made %d node changes in %v", events, churnEnd.Sub(p.start).Round(10*time.Millisecond))
			if wants, _, err = r.wantsFor(daemonSets); err != nil {
				return err
			}
			at, err = r.w.waitConverged(r.ctx, wants, r.ctrl, r.o.Timeout)
			if err != nil {
				r.addCosts("churn: ", r.end(p))
				return fmt.Errorf("settling after the churn: %w", err)
			}
			if err := sleep(r.ctx, tail); err != nil {
				return err
			}
			pr := r.endAt(p, at)
			r.add(Metric{Name: "churn: node changes made", Unit: Count, Value: float64(events), NoRatio: true})
			r.add(Metric{Name: "churn: settled after last change (s)", Unit: Seconds, Value: at.Sub(churnEnd).Seconds()})
			r.add(Metric{Name: "churn: controller CPU per node change (ms)", Unit: Millis, Value: float64(pr.cpu.Milliseconds()) / float64(events)})
			r.addCosts("churn: ", pr)

			// New nodes.
			if o.ChurnAddNodes == 0 {
				return nil
			}
			if err := sleep(r.ctx, settle); err != nil {
				return err
			}
			return r.addNodes(daemonSets, o.ChurnAddNodes)
		}}
}

// churn changes nodes at the configured rate for the configured time, round robin
// over the m simulated nodes. Change e relabels its node into the next pool when e
// is a multiple of 10 (its pods move to other DaemonSets), else toggles the
// maintenance taint (every DaemonSet tolerates it) when e is odd, else bumps the
// rev label (which the NotIn affinity reads, to no effect). It returns how many
// changes were made.
func (r *runCtx) churn(m int) (int, error) {
	total := r.o.ChurnRate * int(r.o.ChurnDuration/time.Second)
	tick := time.NewTicker(time.Second / time.Duration(r.o.ChurnRate))
	defer tick.Stop()
	inflight := make(chan struct{}, 16)
	var wg sync.WaitGroup
	var done atomic.Int64
	var firstErr atomic.Value
	for e := range total {
		select {
		case <-tick.C:
		case <-r.ctx.Done():
			return int(done.Load()), r.ctx.Err()
		}
		if err, _ := firstErr.Load().(error); err != nil {
			break
		}
		inflight <- struct{}{}
		wg.Go(func() {
			defer func() { <-inflight }()
			if err := r.changeNode(nodesim.NodeNamePrefix+strconv.Itoa(e%m), e); err != nil {
				firstErr.CompareAndSwap(nil, err)
				return
			}
			done.Add(1)
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return int(done.Load()), fmt.Errorf("changing nodes: %w", err)
	}
	return int(done.Load()), nil
}

// changeNode makes churn change e to the named node.
func (r *runCtx) changeNode(name string, e int) error {
	mutate := func(node *v1.Node) {
		switch {
		case e%10 == 0:
			next := 0
			if cur := node.Labels[labelPool]; len(cur) > 1 {
				next, _ = strconv.Atoi(cur[1:])
				next++
			}
			node.Labels[labelPool] = poolName(next)
		case e%2 == 1:
			taints := node.Spec.Taints[:0:0]
			found := false
			for _, t := range node.Spec.Taints {
				if t.Key == taintMaintain {
					found = true
					continue
				}
				taints = append(taints, t)
			}
			if !found {
				taints = append(taints, v1.Taint{Key: taintMaintain, Value: "true", Effect: v1.TaintEffectNoSchedule})
			}
			node.Spec.Taints = taints
		default:
			node.Labels[labelRev] = strconv.Itoa(e)
		}
	}
	node := r.w.node(name)
	for attempt := 0; ; attempt++ {
		if node == nil || attempt > 0 {
			var err error
			if node, err = r.sb.Client.CoreV1().Nodes().Get(r.ctx, name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		node = node.DeepCopy()
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		mutate(node)
		_, err := r.sb.Client.CoreV1().Nodes().Update(r.ctx, node, metav1.UpdateOptions{FieldManager: benchFieldOwner})
		if err == nil || !apierrors.IsConflict(err) || attempt >= 10 {
			return err
		}
	}
}

// addNodes adds count simulated nodes at once, in the pools in turn, and measures
// how long each waits for its pods.
func (r *runCtx) addNodes(daemonSets []*apps.DaemonSet, count int) error {
	p := r.begin()
	created := make([]time.Time, count)
	names := make([]string, count)
	err := parallel(r.ctx, count, 16, func(ctx context.Context, i int) error {
		names[i] = fmt.Sprintf("bench-new-%d", i)
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: names[i], Labels: map[string]string{
			nodesim.LabelSimulated: "true", v1.LabelHostname: names[i], labelPool: poolName(i),
		}}}
		if _, err := r.sb.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return err
		}
		created[i] = time.Now()
		return nil
	})
	if err != nil {
		return fmt.Errorf("adding nodes: %w", err)
	}
	// Wait for the new nodes to be usable, so that what the DaemonSets should show
	// can be worked out from them.
	err = wait.PollUntilContextTimeout(r.ctx, 200*time.Millisecond, r.o.Timeout, true, func(context.Context) (bool, error) {
		for _, n := range names {
			if _, ok := r.w.usableTime(n); !ok {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the new nodes to be Ready: %w", err)
	}
	wants, nodes, err := r.wantsFor(daemonSets)
	if err != nil {
		return err
	}
	at, err := r.w.waitConverged(r.ctx, wants, r.ctrl, r.o.Timeout)
	if err != nil {
		return fmt.Errorf("placing pods on the new nodes: %w", err)
	}
	if err := sleep(r.ctx, tail); err != nil {
		return err
	}
	pr := r.endAt(p, at)
	byName := map[string]*v1.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	var fromCreate, fromUsable []time.Duration
	pods := 0
	for i, name := range names {
		want := 0
		for _, ds := range daemonSets {
			if node := byName[name]; node != nil && shouldRun(ds, node) {
				want++
			}
		}
		pods += want
		if want == 0 {
			continue
		}
		seen := r.w.podTimes(name)
		if len(seen) < want {
			return fmt.Errorf("node %s: saw %d pods created, want %d", name, len(seen), want)
		}
		last := seen[want-1]
		fromCreate = append(fromCreate, last.Sub(created[i]))
		if u, ok := r.w.usableTime(name); ok {
			fromUsable = append(fromUsable, last.Sub(u))
		}
	}
	r.logf("%d new nodes got their %d pods; converged in %v", count, pods, pr.elapsed.Round(10*time.Millisecond))
	r.add(Metric{Name: "new nodes: created → all pods created, p50 (s)", Unit: Seconds, Value: percentile(fromCreate, 50).Seconds()})
	r.add(Metric{Name: "new nodes: created → all pods created, p99 (s)", Unit: Seconds, Value: percentile(fromCreate, 99).Seconds()})
	r.add(Metric{Name: "new nodes: Ready → all pods created, p50 (s)", Unit: Seconds, Value: percentile(fromUsable, 50).Seconds()})
	r.add(Metric{Name: "new nodes: Ready → all pods created, p99 (s)", Unit: Seconds, Value: percentile(fromUsable, 99).Seconds()})
	r.add(Metric{Name: "new nodes: converge (s)", Unit: Seconds, Value: pr.elapsed.Seconds()})
	r.add(Metric{Name: "new nodes: controller CPU per node (ms)", Unit: Millis, Value: float64(pr.cpu.Milliseconds()) / float64(count)})
	return nil
}

// steadyState runs DaemonSets on every node, then makes a share of their pods
// unready and ready again, and counts the status writes that follow.
func steadyState(name string, o Options) scenario {
	n := o.SteadyNodes
	title := fmt.Sprintf("steady state: %d nodes × %d DaemonSets; %d%% of pods unready, then ready", n, o.SteadyDaemonSets, o.SteadyPercent)
	return scenario{name: name, title: title, nodes: n, run: func(r *runCtx) error {
		t0 := time.Now()
		wants, err := r.createDaemonSets(o.SteadyDaemonSets, n)
		if err != nil {
			return err
		}
		at, err := r.w.waitConverged(r.ctx, wants, r.ctrl, r.o.Timeout)
		if err != nil {
			return fmt.Errorf("setting up: %w", err)
		}
		r.logf("set up %d pods in %v", n*o.SteadyDaemonSets, at.Sub(t0).Round(10*time.Millisecond))
		r.addConverge("setup: ", at.Sub(t0), n*o.SteadyDaemonSets)
		if err := sleep(r.ctx, settle); err != nil {
			return err
		}

		list, err := r.sb.Client.CoreV1().Pods(Namespace).List(r.ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		pods := list.Items
		sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
		count := max(1, (len(pods)*o.SteadyPercent+50)/100)
		var chosen []*v1.Pod
		unready := map[string]dsWant{}
		for k := range wants {
			unready[k] = wants[k]
		}
		for i := range count {
			pod := &pods[i*len(pods)/count]
			chosen = append(chosen, pod)
			ds := pod.Labels["app"]
			w := unready[ds]
			w.Available--
			unready[ds] = w
		}
		flip := func(value string) error {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, nodesim.AnnotationReady, value)
			return parallel(r.ctx, len(chosen), 16, func(ctx context.Context, i int) error {
				_, err := r.sb.Client.CoreV1().Pods(Namespace).Patch(ctx, chosen[i].Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
				return err
			})
		}

		p := r.begin()
		if err := flip(`"false"`); err != nil {
			return fmt.Errorf("making pods unready: %w", err)
		}
		down, err := r.w.waitConverged(r.ctx, unready, r.ctrl, r.o.Timeout)
		if err != nil {
			r.addCosts("flips: ", r.end(p))
			return fmt.Errorf("waiting for the status to show unready pods: %w", err)
		}
		upStart := time.Now()
		if err := flip("null"); err != nil {
			return fmt.Errorf("making pods ready: %w", err)
		}
		up, err := r.w.waitConverged(r.ctx, wants, r.ctrl, r.o.Timeout)
		if err != nil {
			r.addCosts("flips: ", r.end(p))
			return fmt.Errorf("waiting for the status to show ready pods: %w", err)
		}
		if err := sleep(r.ctx, tail); err != nil {
			return err
		}
		pr := r.endAt(p, up)
		r.logf("%d pods unready then ready; %d status writes", len(chosen), pr.counts.StatusWrites())
		r.add(Metric{Name: "flips: pods made unready, then ready", Unit: Count, Value: float64(len(chosen)), NoRatio: true})
		r.add(Metric{Name: "flips: unready shown in status after (s)", Unit: Seconds, Value: down.Sub(p.start).Seconds()})
		r.add(Metric{Name: "flips: ready again shown in status after (s)", Unit: Seconds, Value: up.Sub(upStart).Seconds()})
		r.add(Metric{Name: "flips: DaemonSet status writes", Unit: Count, Value: float64(pr.counts.StatusWrites())})
		r.addCosts("flips: ", pr)
		return nil
	}}
}
