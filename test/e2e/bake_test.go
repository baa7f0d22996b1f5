package e2e

import (
	"context"
	"slices"
	"testing"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/everynode/everynode/internal/nodesim"
)

// nodesOffRevision: at most limit of the nodes run anything but one live, Ready pod
// of the revision with hash good — how many nodes a release has disturbed.
func nodesOffRevision(nodes []string, good string, limit int) invariant {
	return invariant{
		name:  "nodes disturbed (not on one Ready pod of the good revision)",
		limit: limit,
		measure: func(byNode map[string][]*v1.Pod) (int, []string) {
			var off []string
			for _, node := range nodes {
				live := livePods(byNode[node])
				if len(live) != 1 || !isPodReady(live[0]) || live[0].Labels[apps.ControllerRevisionHashLabelKey] != good {
					off = append(off, node)
				}
			}
			return len(off), off
		},
	}
}

// TestBakeKeepsACrashingReleaseOnOneNode is the release that used to escape: four
// nodes, maxUnavailable 1, minReadySeconds 0 (the usual setting), max-restarts 2 and
// on-failure rollback, and a release whose containers crash two seconds after they
// start (Ready for about a second each time). The default healthy-time bake keeps
// each new pod from counting as done before it has been Ready, restart-free, for
// 10s, so the budget never moves past the first node: a pod watch sees at most one
// node disturbed from start to rollback, and every node ends on the first revision.
func TestBakeKeepsACrashingReleaseOnOneNode(t *testing.T) {
	ns := newNamespace(t)
	pool := map[string]string{"e2e/pool": ns}
	nodes := newNodes(t, 4, pool)
	ds := daemonSet(ns, "agent", pool)
	ds.Annotations = map[string]string{annMaxRestarts: "2", annOnFailure: "rollback"}
	createDaemonSet(t, ds)
	waitRolledOut(t, ns, "agent", 4)
	rev1 := waitRevisionHash(t, ns, "agent", 1)
	waitProgressing(t, env.client, ns, "agent", v1.ConditionTrue, "NewRevisionAvailable")

	conds := watchProgressing(t, env.client, ns, "agent")
	w := watchInvariants(t, ns, "app=agent", nodesOffRevision(nodes, rev1, 1), maxLivePodsPerNode(1))
	updateDaemonSet(t, ns, "agent", func(ds *apps.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Image = imageV2
		ds.Spec.Template.Annotations = map[string]string{nodesim.AnnotationRestartEvery: "2s"}
	})
	waitFor(t, "the rollback to revision 1's template", func(ctx context.Context) (bool, error) {
		return revisionHashes(t, ns, "agent")[3] == rev1, nil
	})
	waitRolledOut(t, ns, "agent", 4)
	waitProgressing(t, env.client, ns, "agent", v1.ConditionTrue, "NewRevisionAvailable")
	peaks := w.stop(t)
	if peaks[0] != 1 {
		t.Errorf("at most %d nodes were disturbed; want the release to have reached exactly one", peaks[0])
	}
	if seen := conds.stop(); !slices.Contains(seen, "False/RolledBack") {
		t.Errorf("the Progressing condition went through %v, never False/RolledBack", seen)
	}
	byNode := mustDaemonPods(t, ns, "agent")
	for _, node := range nodes {
		if pods := byNode[node]; len(pods) != 1 || pods[0].Labels[apps.ControllerRevisionHashLabelKey] != rev1 {
			t.Errorf("node %s ends with %d pods, want one of revision 1", node, len(pods))
		}
	}
}
