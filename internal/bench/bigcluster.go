package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/everynode/everynode/internal/nodesim"
)

// labelWorkload marks the big-cluster scenario's pods that belong to no DaemonSet.
const labelWorkload = "bench.everynode.dev/workload"

// bigCluster is what a DaemonSet controller pays for on a large cluster: every pod
// of the cluster is in its pod cache. Before the controller starts, BigPods pods
// that belong to no DaemonSet (a web application's, say) are created bound to the
// nodes by a plain client and run; then BigDaemonSets DaemonSets are created on
// every node. The measures that matter are the controller's peak memory (VmHWM,
// and sampled RssAnon); the time to converge is reported too.
func bigCluster(name string, o Options) scenario {
	n, pods := o.BigNodes, o.BigPods
	title := fmt.Sprintf("big cluster: %d nodes, %d pods of no DaemonSet, then %d DaemonSets", n, pods, o.BigDaemonSets)
	return scenario{name: name, title: title, nodes: n,
		prepare: func(r *runCtx) error {
			t0 := time.Now()
			err := parallel(r.ctx, pods, 32, func(ctx context.Context, i int) error {
				_, err := r.sb.Client.CoreV1().Pods(Namespace).Create(ctx, workloadPod(i, nodesim.NodeNamePrefix+strconv.Itoa(i%n)), metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					return nil
				}
				return err
			})
			if err != nil {
				return fmt.Errorf("creating the workload pods: %w", err)
			}
			if err := waitPodsRunning(r.ctx, r, pods, r.o.Timeout); err != nil {
				return err
			}
			r.logf("%d workload pods running after %v", pods, time.Since(t0).Round(time.Second))
			return sleep(r.ctx, settle)
		},
		run: func(r *runCtx) error {
			p := r.begin()
			wants, err := r.createDaemonSets(o.BigDaemonSets, n)
			if err != nil {
				return err
			}
			at, err := r.waitConverged(wants)
			if err != nil {
				r.addCosts("", r.end(p))
				return err
			}
			if err := sleep(r.ctx, tail); err != nil {
				return err
			}
			pr := r.endAt(p, at)
			r.addConverge("", pr.elapsed, o.BigDaemonSets*n)
			r.addCosts("", pr)
			return nil
		},
	}
}

// workloadPod is a pod of an ordinary application, bound to node: what a cluster's
// pods are mostly like, with the fields the API server fills in for them.
func workloadPod(i int, node string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: Namespace, Name: fmt.Sprintf("web-%06d", i),
			Labels:      map[string]string{labelWorkload: "web", "app.kubernetes.io/name": "web", "pod-template-hash": "5d8f7c9b4"},
			Annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "8080"},
		},
		Spec: v1.PodSpec{
			NodeName: node,
			Containers: []v1.Container{{
				Name: "web", Image: "registry.example/web:1.27.3",
				Args:  []string{"--listen=:8080", "--log-format=json"},
				Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				Env:   []v1.EnvVar{{Name: "MODE", Value: "production"}, {Name: "CACHE_SIZE", Value: "256Mi"}},
				Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1m"), v1.ResourceMemory: resource.MustParse("1Mi")},
				},
				ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}},
			}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
}

// waitPodsRunning waits until want workload pods are Running.
func waitPodsRunning(ctx context.Context, r *runCtx, want int, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 5*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := r.sb.Client.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: labelWorkload, ResourceVersion: "0"})
		if err != nil {
			return false, nil
		}
		running := 0
		for i := range list.Items {
			if list.Items[i].Status.Phase == v1.PodRunning {
				running++
			}
		}
		return running >= want, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d workload pods to run: %w", want, err)
	}
	return nil
}
