package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"

	"github.com/everynode/everynode/internal/nodesim"
)

// labelWorkload marks the big-cluster scenario's pods that belong to no DaemonSet.
const labelWorkload = "bench.everynode.dev/workload"

// bigCluster is what a DaemonSet controller pays for on a large cluster: every pod
// of the cluster is in its pod cache. Before the controller starts, BigPods pods
// that belong to no DaemonSet (a web application's) are created bound to the nodes
// by a plain client and run, and a ReplicaSet adopts them, as a real application's
// pods are controlled; then BigDaemonSets DaemonSets are created on every node. The
// measures that matter are the controller's peak memory (VmHWM, and sampled
// RssAnon); the time to converge is reported too.
func bigCluster(name string, o Options) scenario {
	n, pods := o.BigNodes, o.BigPods
	title := fmt.Sprintf("big cluster: %d nodes, %d pods of no DaemonSet, then %d DaemonSets", n, pods, o.BigDaemonSets)
	return scenario{name: name, title: title, nodes: n,
		prepare: func(r *runCtx) error {
			t0 := time.Now()
			var created atomic.Int64
			stop := r.every(func(waited time.Duration) string {
				return fmt.Sprintf("%d of %d workload pods created, %v", created.Load(), pods, waited)
			})
			err := parallel(r.ctx, pods, 32, func(ctx context.Context, i int) error {
				_, err := r.sb.Client.CoreV1().Pods(Namespace).Create(ctx, workloadPod(i, nodesim.NodeNamePrefix+strconv.Itoa(i%n)), metav1.CreateOptions{})
				if err == nil || apierrors.IsAlreadyExists(err) {
					created.Add(1)
					return nil
				}
				return err
			})
			stop()
			if err != nil {
				return fmt.Errorf("creating the workload pods: %w", err)
			}
			if err := waitPodsRunning(r.ctx, r, pods, r.o.Timeout); err != nil {
				return err
			}
			r.logf("%d workload pods running after %v", pods, time.Since(t0).Round(time.Second))
			if err := adoptWorkload(r, pods); err != nil {
				return err
			}
			r.logf("%d workload pods controlled by ReplicaSet %s after %v", pods, workloadName, time.Since(t0).Round(time.Second))
			return sleep(r.ctx, settle)
		},
		run: func(r *runCtx) error {
			p := r.begin()
			wants, err := r.createDaemonSets(o.BigDaemonSets, n, runAtOnce)
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
// pods are mostly like, with the fields the API server fills in for them. The node
// simulator runs it as soon as it sees it (no ready delay): one status write for
// each of the many background pods instead of two.
func workloadPod(i int, node string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: Namespace, Name: workloadPodName(i),
			Labels: map[string]string{labelWorkload: "web", "app.kubernetes.io/name": "web", "pod-template-hash": "5d8f7c9b4"},
			Annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "8080",
				nodesim.AnnotationReadyAfter: "0s"},
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

// runAtOnce makes the node simulator run the pods of ds on their first status
// write, as the workload's: at 5,000 nodes the simulator's pod status writes are
// what the API server of a 2-core machine keeps up with least, and a second write
// for each pod would slow every controller's convergence alike while the measures
// that matter here are memory.
func runAtOnce(ds *apps.DaemonSet) {
	metav1.SetMetaDataAnnotation(&ds.Spec.Template.ObjectMeta, nodesim.AnnotationReadyAfter, "0s")
}

// waitPodsRunning waits until all want workload pods, created before, are Running.
// It lists only the metadata of those not Running yet (a field selector): a list of
// every pod of a big cluster every few seconds would keep the API server it waits on
// and the benchmark's own process busy.
func waitPodsRunning(ctx context.Context, r *runCtx, want int, timeout time.Duration) error {
	var running atomic.Int64
	stop := r.every(func(waited time.Duration) string {
		return fmt.Sprintf("%d of %d workload pods running, %v", running.Load(), want, waited)
	})
	defer stop()
	notRunning := fields.OneTermNotEqualSelector("status.phase", string(v1.PodRunning)).String()
	err := wait.PollUntilContextTimeout(ctx, 5*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := listWorkloadMetadata(ctx, r, notRunning)
		if err != nil {
			return false, nil
		}
		running.Store(int64(want - len(list.Items)))
		return len(list.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d workload pods to run: %w", want, err)
	}
	return nil
}

// workloadPodName names the i-th workload pod.
func workloadPodName(i int) string { return fmt.Sprintf("web-%06d", i) }

// workloadName is the big-cluster scenario's ReplicaSet.
const workloadName = "web"

// adoptWorkload creates a ReplicaSet of want replicas that selects the workload pods,
// makes it their controller as kube-controller-manager's ReplicaSet controller would
// (which adopts them too, one at a time: over twenty minutes for 50,000 pods), and
// waits until every one is. They already run, so the ReplicaSet creates none.
func adoptWorkload(r *runCtx, want int) error {
	labels := map[string]string{labelWorkload: workloadName}
	rs := &apps.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: workloadName},
		Spec: apps.ReplicaSetSpec{
			Replicas: new(int32(want)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       workloadPod(0, "").Spec,
			},
		},
	}
	made, err := r.sb.Client.AppsV1().ReplicaSets(Namespace).Create(r.ctx, rs, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		made, err = r.sb.Client.AppsV1().ReplicaSets(Namespace).Get(r.ctx, workloadName, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("creating the workload's ReplicaSet: %w", err)
	}
	ref := metav1.NewControllerRef(made, apps.SchemeGroupVersion.WithKind("ReplicaSet"))
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": []*metav1.OwnerReference{ref}}})
	if err != nil {
		return err
	}
	var patched atomic.Int64
	stopPatched := r.every(func(waited time.Duration) string {
		return fmt.Sprintf("%d of %d workload pods given ReplicaSet %s as their controller, %v", patched.Load(), want, workloadName, waited)
	})
	err = parallel(r.ctx, want, 32, func(ctx context.Context, i int) error {
		_, err := r.sb.Client.CoreV1().Pods(Namespace).Patch(ctx, workloadPodName(i), types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		if err == nil {
			patched.Add(1)
		}
		return err
	})
	stopPatched()
	if err != nil {
		return fmt.Errorf("making ReplicaSet %s the workload pods' controller: %w", workloadName, err)
	}
	var adopted atomic.Int64
	stop := r.every(func(waited time.Duration) string {
		return fmt.Sprintf("%d of %d workload pods adopted by ReplicaSet %s, %v", adopted.Load(), want, workloadName, waited)
	})
	defer stop()
	// Every pod's metadata is listed, so not too often.
	err = wait.PollUntilContextTimeout(r.ctx, 10*time.Second, r.o.Timeout, true, func(ctx context.Context) (bool, error) {
		list, err := listWorkloadMetadata(ctx, r, "")
		if err != nil {
			return false, nil
		}
		owned := 0
		for i := range list.Items {
			if ref := metav1.GetControllerOf(&list.Items[i]); ref != nil && ref.Kind == "ReplicaSet" {
				owned++
			}
		}
		adopted.Store(int64(owned))
		if len(list.Items) > want {
			return false, fmt.Errorf("the ReplicaSet made pods of its own: %d workload pods, want %d", len(list.Items), want)
		}
		return owned == want, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the ReplicaSet to adopt %d workload pods: %w", want, err)
	}
	return nil
}

// listWorkloadMetadata lists the metadata of the workload pods that match
// fieldSelector ("" for all) from the API server's watch cache.
func listWorkloadMetadata(ctx context.Context, r *runCtx, fieldSelector string) (*metav1.PartialObjectMetadataList, error) {
	client, err := metadata.NewForConfig(r.sb.Config)
	if err != nil {
		return nil, err
	}
	return client.Resource(v1.SchemeGroupVersion.WithResource("pods")).Namespace(Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labelWorkload, FieldSelector: fieldSelector, ResourceVersion: "0"})
}
