package controller

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/everynode/everynode/internal/daemon"
)

// The gate run alone removes the taint of a node whose gating pod is available, and
// keeps the taint of one whose gating pod is not Ready.
func TestRunNodeGate(t *testing.T) {
	ds := gatingDaemonSet("agent", agentsGate)
	ds.UID = "uid-agent"
	pod := func(node string, ready v1.ConditionStatus) *v1.Pod {
		p := daemon.PodForNode(ds, daemon.PodTemplate(ds, "h1"), node)
		p.Name, p.GenerateName, p.UID, p.Spec.NodeName = "agent-"+node, "", types.UID("uid-"+node), node
		p.Status = v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: ready}}}
		return p
	}
	node := func(name string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"os": "linux"}},
			Spec: v1.NodeSpec{Taints: []v1.Taint{gateTaint(agentsGate)}}}
	}
	client := fake.NewClientset(ds, node("ready"), node("starting"), pod("ready", v1.ConditionTrue), pod("starting", v1.ConditionFalse))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- RunNodeGate(ctx, client) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunNodeGate: %v", err)
		}
	}()
	taints := func(name string) []v1.Taint {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n.Spec.Taints
	}
	err := wait.PollUntilContextTimeout(ctx, pollInterval, waitTimeout, true, func(context.Context) (bool, error) {
		return len(taints("ready")) == 0, nil
	})
	if err != nil {
		t.Fatalf("the gate taint of node ready stayed: %v", taints("ready"))
	}
	time.Sleep(200 * time.Millisecond)
	if got := taints("starting"); len(got) != 1 {
		t.Errorf("node starting, whose gating pod is not Ready, has taints %v; want the gate's", got)
	}
}
