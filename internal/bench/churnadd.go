package bench

import (
	"context"
	"fmt"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/everynode/everynode/internal/nodesim"
)

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

// tainted counts the nodes with a taint, and names the first taint seen.
func tainted(nodes []*v1.Node) (int, string) {
	n, first := 0, ""
	for _, node := range nodes {
		if len(node.Spec.Taints) == 0 {
			continue
		}
		if n++; first == "" {
			first = node.Spec.Taints[0].ToString()
		}
	}
	return n, first
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
			nodesim.LabelSimulated: "true", v1.LabelHostname: names[i], labelPool: poolName(i, r.o.ChurnPools),
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
	at, err := r.waitConverged(wants)
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
