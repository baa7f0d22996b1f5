package bench

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// floorNamespace holds the pods of the create-rate measurement.
const floorNamespace = "bench-floor"

// measureCreateRate is the physical limit a DaemonSet controller works against: how
// many pods a second the sandbox's API server creates for a plain client with no
// client-side rate limit and the given parallelism. The pods are DaemonSet-like (the
// benchmark's pod template, pinned by node affinity) but bound to a node that does
// not exist, so neither the scheduler nor the node simulator touches them; they are
// deleted again, and gone, before it returns.
func measureCreateRate(ctx context.Context, client kubernetes.Interface, pods, workers int) (float64, error) {
	if err := ensureNamespace(ctx, client, floorNamespace); err != nil {
		return 0, err
	}
	tmpl := daemonSet("floor").Spec.Template
	start := time.Now()
	err := parallel(ctx, pods, workers, func(ctx context.Context, i int) error {
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("floor-%d", i), Namespace: floorNamespace, Labels: tmpl.Labels},
			Spec:       *tmpl.Spec.DeepCopy(),
		}
		pod.Spec.NodeName = "bench-floor-nowhere"
		pod.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{
				Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{pod.Spec.NodeName},
			}}}},
		}}}
		_, err := client.CoreV1().Pods(floorNamespace).Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
	elapsed := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("creating pods: %w", err)
	}
	rate := float64(pods) / elapsed.Seconds()
	if err := client.CoreV1().Pods(floorNamespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
		return 0, fmt.Errorf("deleting pods: %w", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Pods(floorNamespace).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(list.Items) == 0, nil
	})
	if err != nil {
		return 0, fmt.Errorf("waiting for the pods to go: %w", err)
	}
	return rate, nil
}
