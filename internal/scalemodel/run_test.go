package scalemodel

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/everynode/everynode/internal/daemon"
)

// The model at a small size runs its three phases to the end, and the cluster it
// leaves has, on every node, exactly one pod of each DaemonSet selecting the node's
// pool, running the changed image, and no other. No time is asserted.
func TestRunSmall(t *testing.T) {
	s := Size{Nodes: 60, DaemonSets: 4, Pools: 3, ChurnRate: 40, ChurnDuration: 2 * time.Second, Timeout: 2 * time.Minute}
	c, err := newCluster(s.Nodes, s.Pools)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.run(context.Background(), s, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if r.ChurnMoves != 80 || r.ChurnCPUPerMoveMs <= 0 || r.CreateSeconds <= 0 || r.RolloutSeconds <= 0 {
		t.Errorf("result %+v: want 80 moves and every phase measured", r)
	}
	if r.ControllerHeapBytes <= 0 {
		t.Errorf("controller heap %d: the heap did not shrink once the controller stopped", r.ControllerHeapBytes)
	}

	ctx := context.Background()
	nodes, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := c.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]int{} // node/DaemonSet → pods
	for i := range pods.Items {
		pod := &pods.Items[i]
		node, _ := daemon.TargetNode(pod)
		if img := pod.Spec.Containers[0].Image; img != image2 {
			t.Errorf("pod %s on %s runs %s", pod.Name, node, img)
		}
		if pod.Status.Phase != v1.PodRunning {
			t.Errorf("pod %s on %s is %s", pod.Name, node, pod.Status.Phase)
		}
		have[node+"/"+pod.Labels["app"]]++
	}
	want := 0
	for _, node := range nodes.Items {
		for i := range s.DaemonSets {
			ds := daemonSet(i, s.Pools)
			n := have[node.Name+"/"+ds.Name]
			if node.Labels[poolLabel] == ds.Spec.Template.Spec.NodeSelector[poolLabel] {
				want++
				if n != 1 {
					t.Errorf("node %s (%s) has %d pods of %s, want 1", node.Name, node.Labels[poolLabel], n, ds.Name)
				}
			} else if n != 0 {
				t.Errorf("node %s (%s) has %d pods of %s, want none", node.Name, node.Labels[poolLabel], n, ds.Name)
			}
		}
	}
	if len(pods.Items) != want {
		t.Errorf("%d pods, want %d", len(pods.Items), want)
	}
}
