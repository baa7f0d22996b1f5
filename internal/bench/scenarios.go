package bench

import (
	"context"
	"fmt"
	"sort"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/everynode/everynode/internal/daemon"
	"github.com/everynode/everynode/internal/nodesim"
)

// scenario is one workload. prepare, if set, runs before the controller starts;
// run with it running, and records the scenario's metrics.
type scenario struct {
	name, title string
	nodes       int
	// floor: the floor controller runs it too.
	floor bool
	// separateGate: a controller that is not everynode's runs beside the node gate
	// as a controller of its own (gate.go).
	separateGate bool
	prepare      func(r *runCtx) error
	run          func(r *runCtx) error
}

// ScenarioNames are the scenarios, in the order they run.
func ScenarioNames() []string {
	return append(DefaultScenarios(), "burst")
}

// DefaultScenarios are the scenarios a run without --scenarios runs: all but burst,
// whose settled cluster is large.
func DefaultScenarios() []string {
	return []string{"create", "create-5", "rolling", "surge", "in-place", "churn", "steady", "big-cluster"}
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
		return rollingUpdate(name, o.Nodes, "maxUnavailable=10%", apps.RollingUpdateDaemonSet{MaxUnavailable: &ten, MaxSurge: &zero}, nil)
	case "in-place":
		// Upstream has no in-place update and ignores the annotation: it replaces
		// the pods, which is what everynode's in-place update is measured against.
		ten := intstr.FromString("10%")
		zero := intstr.FromInt32(0)
		return rollingUpdate(name, o.Nodes, "maxUnavailable=10%, in place (upstream: replaced)",
			apps.RollingUpdateDaemonSet{MaxUnavailable: &ten, MaxSurge: &zero}, map[string]string{daemon.AnnotationInPlace: "true"})
	case "surge":
		ten := intstr.FromString("10%")
		zero := intstr.FromInt32(0)
		return rollingUpdate(name, o.Nodes, "maxSurge=10%", apps.RollingUpdateDaemonSet{MaxUnavailable: &zero, MaxSurge: &ten}, nil)
	case "churn":
		return nodeChurn(name, o)
	case "steady":
		return steadyState(name, o)
	case "big-cluster":
		return bigCluster(name, o)
	case "burst":
		return burst(name, o)
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
func (r *runCtx) createDaemonSets(count, nodes int, edits ...func(*apps.DaemonSet)) (map[string]dsWant, error) {
	wants := map[string]dsWant{}
	for i := range count {
		ds := daemonSet(fmt.Sprintf("ds-%d", i))
		for _, edit := range edits {
			edit(ds)
		}
		ds, err := r.createDaemonSet(ds)
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
		at, err := r.waitConverged(wants)
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

// rollingUpdate creates a DaemonSet with the given rolling update budget (and
// annotations), waits for it, then changes its image and measures the update until
// it has converged.
func rollingUpdate(name string, nodes int, budget string, strategy apps.RollingUpdateDaemonSet, annotations map[string]string) scenario {
	return scenario{name: name, title: fmt.Sprintf("rolling update, %s × %d nodes", budget, nodes), nodes: nodes, run: func(r *runCtx) error {
		ds := daemonSet("ds-0")
		ds.Spec.UpdateStrategy.RollingUpdate = &strategy
		ds.Annotations = annotations
		t0 := time.Now()
		created, err := r.createDaemonSet(ds)
		if err != nil {
			return err
		}
		n := int32(nodes)
		at, err := r.waitConverged(map[string]dsWant{ds.Name: {created.Generation, n, n}})
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
		at, err = r.waitConverged(map[string]dsWant{ds.Name: {gen, n, n}})
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
		at, err := r.waitConverged(wants)
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
		down, err := r.waitConverged(unready)
		if err != nil {
			r.addCosts("flips: ", r.end(p))
			return fmt.Errorf("waiting for the status to show unready pods: %w", err)
		}
		upStart := time.Now()
		if err := flip("null"); err != nil {
			return fmt.Errorf("making pods ready: %w", err)
		}
		up, err := r.waitConverged(wants)
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
