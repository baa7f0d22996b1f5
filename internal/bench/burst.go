package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/everynode/everynode/internal/nodesim"
)

// burst is many nodes joining a settled cluster at once. BurstNodes nodes run the
// burst DaemonSets (a CNI agent, nine more tolerating every taint, ten plain),
// created with a plain client before the controller starts, so that it finds every
// pod current. Then BurstAdd nodes are added at once, each NotReady until its CNI
// pod runs, and tainted by the storage agent's node gate until that agent is
// available there. Per new node it measures the time from its creation to its CNI
// pod created, to the node Ready, to the gate taint removed, and to all its pods
// Running.
func burst(name string, o Options) scenario {
	n, add := o.BurstNodes, o.BurstAdd
	title := fmt.Sprintf("burst: %d nodes × %d DaemonSets (1 CNI agent, %d tolerating all, 1 of them gating new nodes, %d plain), then %d nodes added at once",
		n, 1+burstTolerant+burstPlain, burstTolerant, burstPlain, add)
	// The stored DaemonSets of the current run (runs are one after the other).
	var daemonSets []*apps.DaemonSet
	return scenario{name: name, title: title, nodes: n, separateGate: true,
		prepare: func(r *runCtx) error {
			var err error
			daemonSets, err = r.settleBurst(n)
			return err
		},
		run: func(r *runCtx) error {
			if err := r.awaitSettled(daemonSets, n); err != nil {
				return err
			}
			if err := sleep(r.ctx, settle); err != nil {
				return err
			}
			return r.burstNodes(daemonSets, n, add)
		},
	}
}

// settleBurst creates the burst DaemonSets and, for every one of them and every
// one of the n nodes, the pod a controller would have created, bound; marks the
// nodes' readiness as waiting for the CNI agent (they are Ready already, and stay
// so); and waits until every pod runs. It returns the stored DaemonSets.
func (r *runCtx) settleBurst(n int) ([]*apps.DaemonSet, error) {
	t0 := time.Now()
	var stored []*apps.DaemonSet
	var templates []*v1.PodTemplateSpec
	for _, ds := range burstDaemonSets() {
		out, err := r.createDaemonSet(ds)
		if err != nil {
			return nil, err
		}
		stored = append(stored, out)
		templates = append(templates, settledTemplate(out))
	}
	k := len(stored)
	total := k * n
	// Node by node, so that each node has its CNI pod among the first.
	err := parallel(r.ctx, total, 32, func(ctx context.Context, i int) error {
		pod := settledPod(stored[i%k], templates[i%k], nodesim.NodeNamePrefix+strconv.Itoa(i/k))
		_, err := r.sb.Client.CoreV1().Pods(Namespace).Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("creating the settled pods: %w", err)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, nodesim.AnnotationReadyRequires, burstCNISelector)
	err = parallel(r.ctx, n, 16, func(ctx context.Context, i int) error {
		_, err := r.sb.Client.CoreV1().Nodes().Patch(ctx, nodesim.NodeNamePrefix+strconv.Itoa(i), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("annotating the nodes: %w", err)
	}
	err = wait.PollUntilContextTimeout(r.ctx, time.Second, r.o.Timeout, true, func(context.Context) (bool, error) {
		return r.w.pods.runningCount() >= total, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for %d settled pods to run (%d do): %w", total, r.w.pods.runningCount(), err)
	}
	r.logf("%d DaemonSets with %d pods running after %v", k, total, time.Since(t0).Round(time.Second))
	return stored, nil
}

// awaitSettled waits until the controller shows every DaemonSet converged on the n
// nodes, and records the pods it created or deleted since it started, which should
// be none: it found every pod current.
func (r *runCtx) awaitSettled(daemonSets []*apps.DaemonSet, n int) error {
	if _, err := r.waitConverged(wantsOn(daemonSets, n)); err != nil {
		return fmt.Errorf("settling: %w", err)
	}
	since := r.proxy.Snapshot() // the proxy counts from the controller's start
	churned := since.Get("create", "pods").Requests + since.Get("delete", "pods").Requests
	r.logf("settled; %d pods created or deleted since the controller started", churned)
	r.add(Metric{Name: "settle: pods created or deleted (0: all found current)", Unit: Count, Value: float64(churned)})
	return nil
}

// wantsOn is what every DaemonSet must show once its pods run on all n nodes.
func wantsOn(daemonSets []*apps.DaemonSet, n int) map[string]dsWant {
	wants := map[string]dsWant{}
	for _, ds := range daemonSets {
		wants[ds.Name] = dsWant{MinGeneration: ds.Generation, Desired: int32(n), Available: int32(n)}
	}
	return wants
}

// milestoneLag is how long after the DaemonSets converged the benchmark waits for
// its pod watch to show every new node's pods Running (the two watches are apart).
const milestoneLag = 30 * time.Second

// burstNodes adds count nodes at once to the n there are, waits until every
// DaemonSet runs on all of them, and records per new node: created → CNI pod
// created, → Ready, → all pods Running (p50, p99; a node that never got there
// counts as ∞), the time to converge and the costs.
func (r *runCtx) burstNodes(daemonSets []*apps.DaemonSet, n, count int) error {
	p := r.begin()
	names := make([]string, count)
	created := make([]time.Time, count)
	err := parallel(r.ctx, count, 16, func(ctx context.Context, i int) error {
		names[i] = fmt.Sprintf("bench-burst-%d", i)
		if _, err := r.sb.Client.CoreV1().Nodes().Create(ctx, burstNode(names[i]), metav1.CreateOptions{}); err != nil {
			return err
		}
		created[i] = time.Now()
		return nil
	})
	if err != nil {
		return fmt.Errorf("adding nodes: %w", err)
	}
	dsNames := make([]string, len(daemonSets))
	for i, ds := range daemonSets {
		dsNames[i] = ds.Name
	}
	allRunning := func(context.Context) (bool, error) {
		for _, name := range names {
			if _, ok := r.w.pods.allRunningAt(name, dsNames); !ok {
				return false, nil
			}
		}
		return true, nil
	}
	at, convErr := r.waitConverged(wantsOn(daemonSets, n+count))
	if convErr == nil {
		if err := wait.PollUntilContextTimeout(r.ctx, 100*time.Millisecond, milestoneLag, true, allRunning); err != nil && r.ctx.Err() != nil {
			return r.ctx.Err()
		}
		if err := sleep(r.ctx, tail); err != nil {
			return err
		}
	} else {
		at = time.Now()
	}
	pr := r.endAt(p, at)

	var toCNI, toReady, toGate, toRunning latencies
	for i, name := range names {
		t, ok := r.w.pods.createdAt(name, burstCNI)
		toCNI.add(created[i], t, ok)
		t, ok = r.w.usableTime(name)
		toReady.add(created[i], t, ok)
		t, ok = r.w.gateOpenTime(name)
		toGate.add(created[i], t, ok)
		t, ok = r.w.pods.allRunningAt(name, dsNames)
		toRunning.add(created[i], t, ok)
	}
	r.logf("%d nodes added; converged in %v; never Ready: %d, gate never opened: %d, never all pods Running: %d",
		count, pr.elapsed.Round(10*time.Millisecond), toReady.missing, toGate.missing, toRunning.missing)
	for _, l := range []struct {
		name string
		l    latencies
	}{{"created → CNI pod created", toCNI}, {"created → node Ready", toReady}, {"created → gate taint removed", toGate},
		{"created → all pods Running", toRunning}} {
		r.add(Metric{Name: "burst: " + l.name + ", p50 (s)", Unit: Seconds, Value: l.l.seconds(50)})
		r.add(Metric{Name: "burst: " + l.name + ", p99 (s)", Unit: Seconds, Value: l.l.seconds(99)})
	}
	r.add(Metric{Name: "burst: nodes never Ready", Unit: Count, Value: float64(toReady.missing), OmitIfZero: true})
	r.add(Metric{Name: "burst: nodes whose gate taint never went", Unit: Count, Value: float64(toGate.missing), OmitIfZero: true})
	r.add(Metric{Name: "burst: nodes never with all pods Running", Unit: Count, Value: float64(toRunning.missing), OmitIfZero: true})
	if convErr == nil {
		r.addConverge("burst: ", pr.elapsed, count*len(daemonSets))
	}
	r.add(Metric{Name: "burst: controller CPU per new node (ms)", Unit: Millis, Value: float64(pr.cpu.Milliseconds()) / float64(count)})
	r.addCosts("burst: ", pr)
	if convErr != nil {
		return fmt.Errorf("placing pods on the new nodes: %w", convErr)
	}
	return nil
}
