package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/everynode/everynode/internal/nodesim"
)

// What the churn scenario's node changes are (--churn-changes).
const (
	// ChurnMoves: every change moves a node to the next pool, and the DaemonSets
	// select pools only: each move is two creates and two deletes at two
	// DaemonSets a pool.
	ChurnMoves = "moves"
	// ChurnMixed: one change in ten moves a node, the others toggle a taint every
	// DaemonSet tolerates or bump a label only a NotIn node affinity reads, which one
	// more DaemonSet has.
	ChurnMixed = "mixed"
)

func poolName(i, pools int) string { return "p" + strconv.Itoa(i%pools) }

// churnDaemonSets are the churn scenario's DaemonSets: n with a node selector on a
// pool each (pools in turn), and, with notIn, one with six NotIn node affinity
// expressions that match every node outside the last two pools.
func churnDaemonSets(n, pools int, notIn bool) []*apps.DaemonSet {
	var out []*apps.DaemonSet
	for i := range n {
		ds := daemonSet(fmt.Sprintf("pool-%d", i))
		ds.Spec.Template.Spec.NodeSelector = map[string]string{labelPool: poolName(i, pools)}
		out = append(out, ds)
	}
	if !notIn {
		return out
	}
	ds := daemonSet("not-in")
	ds.Spec.Template.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchExpressions: []v1.NodeSelectorRequirement{
				{Key: labelPool, Operator: v1.NodeSelectorOpNotIn, Values: []string{poolName(pools-2, pools), poolName(pools-1, pools)}},
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

// poolDaemonSets maps each pool to the DaemonSets whose node selector chooses it.
func poolDaemonSets(daemonSets []*apps.DaemonSet) func(pool string) []string {
	byPool := map[string][]string{}
	for _, ds := range daemonSets {
		if pool, ok := ds.Spec.Template.Spec.NodeSelector[labelPool]; ok {
			byPool[pool] = append(byPool[pool], ds.Name)
		}
	}
	return func(pool string) []string { return byPool[pool] }
}

// nodeChurn labels M nodes into pools, creates the churn DaemonSets, then changes
// nodes at a steady rate, and finally adds nodes at once.
func nodeChurn(name string, o Options) scenario {
	m := o.ChurnNodes
	title := fmt.Sprintf("node churn: %d nodes, %d DaemonSets over %d pools (node selector); %d pool moves/s for %v, then %d nodes added",
		m, o.ChurnDaemonSets, o.ChurnPools, o.ChurnRate, o.ChurnDuration, o.ChurnAddNodes)
	if o.ChurnChanges == ChurnMixed {
		title = fmt.Sprintf("node churn: %d nodes, %d DaemonSets over %d pools (node selector) + 1 NotIn affinity; %d node changes/s for %v (1 in 10 a pool move), then %d nodes added",
			m, o.ChurnDaemonSets, o.ChurnPools, o.ChurnRate, o.ChurnDuration, o.ChurnAddNodes)
	}
	return scenario{name: name, title: title, nodes: m, floor: true,
		prepare: func(r *runCtx) error {
			return parallel(r.ctx, m, 16, func(ctx context.Context, i int) error {
				patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, labelPool, poolName(i, o.ChurnPools))
				_, err := r.sb.Client.CoreV1().Nodes().Patch(ctx, nodesim.NodeNamePrefix+strconv.Itoa(i), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
				return err
			})
		},
		run: func(r *runCtx) error {
			// Setup: every DaemonSet at once.
			var daemonSets []*apps.DaemonSet
			t0 := time.Now()
			for _, ds := range churnDaemonSets(o.ChurnDaemonSets, o.ChurnPools, o.ChurnChanges == ChurnMixed) {
				out, err := r.createDaemonSet(ds)
				if err != nil {
					return err
				}
				daemonSets = append(daemonSets, out)
			}
			wantsNow := func() (map[string]dsWant, error) {
				wants, nodes, err := r.wantsFor(daemonSets)
				if n, key := tainted(nodes); n > 0 {
					r.logf("%d of %d nodes tainted (%s, ...)", n, len(nodes), key)
				}
				return wants, err
			}
			at, wants, err := r.waitConvergedOn(wantsNow)
			pods := wantedPods(wants)
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
			events, moves, err := r.churn(m)
			if err != nil {
				r.addCosts("churn: ", r.end(p))
				return err
			}
			churnEnd := time.Now()
			r.logf("made %d node changes (%d pool moves) in %v", events, len(moves), churnEnd.Sub(p.start).Round(10*time.Millisecond))
			at, _, err = r.waitConvergedOn(wantsNow)
			if err != nil {
				r.addCosts("churn: ", r.end(p))
				return fmt.Errorf("settling after the churn: %w", err)
			}
			if err := sleep(r.ctx, tail); err != nil {
				return err
			}
			pr := r.endAt(p, at)
			lat := moveLatencies(moves, poolDaemonSets(daemonSets), r.w.lives.of)
			r.logf("pool moves answered: p50 %.3f s, p99 %.3f s; never: %d", lat.seconds(50), lat.seconds(99), lat.missing)
			r.add(Metric{Name: "churn: node changes made", Unit: Count, Value: float64(events), NoRatio: true})
			r.add(Metric{Name: "churn: pool moves made", Unit: Count, Value: float64(len(moves)), NoRatio: true})
			r.add(Metric{Name: "churn: pool move → its pods created and deleted, p50 (s)", Unit: Seconds, Value: lat.seconds(50)})
			r.add(Metric{Name: "churn: pool move → its pods created and deleted, p99 (s)", Unit: Seconds, Value: lat.seconds(99)})
			r.add(Metric{Name: "churn: pool moves never answered (count in the percentiles as ∞)", Unit: Count, Value: float64(lat.missing)})
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
// over the m simulated nodes (see changeNode). It returns how many changes were made
// and the pool moves among them.
func (r *runCtx) churn(m int) (int, []poolMove, error) {
	total := r.o.ChurnRate * int(r.o.ChurnDuration/time.Second)
	tick := time.NewTicker(time.Second / time.Duration(r.o.ChurnRate))
	defer tick.Stop()
	inflight := make(chan struct{}, 16)
	var wg sync.WaitGroup
	var done atomic.Int64
	var firstErr atomic.Value
	var mu sync.Mutex
	var moves []poolMove
	for e := range total {
		select {
		case <-tick.C:
		case <-r.ctx.Done():
			return int(done.Load()), moves, r.ctx.Err()
		}
		if err, _ := firstErr.Load().(error); err != nil {
			break
		}
		inflight <- struct{}{}
		wg.Go(func() {
			defer func() { <-inflight }()
			move, err := r.changeNode(nodesim.NodeNamePrefix+strconv.Itoa(e%m), e)
			if err != nil {
				firstErr.CompareAndSwap(nil, err)
				return
			}
			if move != nil {
				mu.Lock()
				moves = append(moves, *move)
				mu.Unlock()
			}
			done.Add(1)
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return int(done.Load()), moves, fmt.Errorf("changing nodes: %w", err)
	}
	return int(done.Load()), moves, nil
}

// changeNode makes churn change e to the named node: a move into the next pool
// (with ChurnMoves always, with ChurnMixed when e is a multiple of 10), else toggle
// the maintenance taint (every DaemonSet tolerates it) when e is odd, else bump the
// rev label (which the NotIn affinity reads, to no effect). A move is returned, timed
// when the API server answered the update.
func (r *runCtx) changeNode(name string, e int) (*poolMove, error) {
	pools := r.o.ChurnPools
	var move *poolMove
	mutate := func(node *v1.Node) {
		move = nil
		switch {
		case r.o.ChurnChanges == ChurnMoves || e%10 == 0:
			cur := node.Labels[labelPool]
			next := 0
			if len(cur) > 1 {
				next, _ = strconv.Atoi(cur[1:])
				next++
			}
			node.Labels[labelPool] = poolName(next, pools)
			move = &poolMove{node: name, from: cur, to: node.Labels[labelPool]}
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
				return nil, err
			}
		}
		node = node.DeepCopy()
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		mutate(node)
		_, err := r.sb.Client.CoreV1().Nodes().Update(r.ctx, node, metav1.UpdateOptions{FieldManager: benchFieldOwner})
		if err == nil {
			if move != nil {
				move.at = time.Now()
			}
			return move, nil
		}
		if !apierrors.IsConflict(err) || attempt >= 10 {
			return nil, err
		}
	}
}
