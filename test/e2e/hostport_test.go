package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestSurgeWithHostPort is kubernetes#106417 against the real scheduler: a
// DaemonSet whose pods take a host port, updated with maxSurge 1 and
// maxUnavailable 0. The surge pod can never be scheduled beside the old pod that
// holds the port. everynode says so, naming the port and the node, and changes
// nothing; with surge-fallback: delete-first it replaces the nodes old pod first,
// one node at a time, and the update finishes.
func TestSurgeWithHostPort(t *testing.T) {
	ns := newNamespace(t)
	pool := map[string]string{"e2e/pool": ns}
	nodes := newNodes(t, 3, pool)
	ds := daemonSet(ns, "agent", pool)
	ds.Spec.Template.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "metrics", ContainerPort: 18080, HostPort: 18080}}
	ds.Spec.UpdateStrategy.RollingUpdate = &apps.RollingUpdateDaemonSet{
		MaxSurge: ptrIntOrString(intstr.FromInt32(1)), MaxUnavailable: ptrIntOrString(intstr.FromInt32(0))}
	ds.Annotations = map[string]string{annMinHealthy: "1s"}
	createDaemonSet(t, ds)
	waitRolledOut(t, ns, "agent", 3)
	rev1 := waitRevisionHash(t, ns, "agent", 1)
	before := onePodPerNode(t, mustDaemonPods(t, ns, "agent"))

	w := watchInvariants(t, ns, "app=agent", maxNodesWithoutReadyPod(nodes, 1), maxLivePodsPerNode(2))
	updateDaemonSet(t, ns, "agent", func(ds *apps.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = imageV2 })
	cond := waitProgressing(t, env.client, ns, "agent", v1.ConditionFalse, "SurgeHostPortConflict")
	for _, word := range []string{"host port 18080/TCP", "on nodes " + nodes[0], "surge-fallback"} {
		if !strings.Contains(cond.Message, word) {
			t.Errorf("condition message %q does not say %q", cond.Message, word)
		}
	}
	if ev := waitEvent(t, ns, "agent", "SurgeHostPortConflict"); ev.Type != v1.EventTypeWarning {
		t.Errorf("SurgeHostPortConflict event is of type %s, want Warning", ev.Type)
	}
	consistently(t, "the old pods stay while nothing can progress", 3*time.Second, func(ctx context.Context) (bool, error) {
		byNode, err := daemonPods(ctx, ns, "agent")
		if err != nil {
			return false, err
		}
		for node, uid := range before {
			if !hasLivePod(byNode[node], uid) {
				return false, nil
			}
		}
		return true, nil
	})

	updateDaemonSet(t, ns, "agent", func(ds *apps.DaemonSet) { ds.Annotations[annSurgeFallback] = "delete-first" })
	waitRolledOut(t, ns, "agent", 3)
	waitProgressing(t, env.client, ns, "agent", v1.ConditionTrue, "NewRevisionAvailable")
	peaks := w.stop(t)
	if peaks[0] != 1 {
		t.Errorf("at most %d nodes were without a Ready pod; want the fallback to take one node at a time", peaks[0])
	}
	for node, pods := range mustDaemonPods(t, ns, "agent") {
		if len(pods) != 1 || pods[0].Labels[apps.ControllerRevisionHashLabelKey] == rev1 {
			t.Errorf("node %s ends with %v, want one pod of revision 2", node, podNames(map[string][]v1.Pod{node: pods}))
		}
	}
}

// hasLivePod reports whether pods hold the pod uid, not being deleted.
func hasLivePod(pods []v1.Pod, uid types.UID) bool {
	for _, p := range pods {
		if p.UID == uid && p.DeletionTimestamp == nil {
			return true
		}
	}
	return false
}
