package e2e

import (
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/everynode/everynode/internal/nodesim"
)

// TestFailingContainerFailsTheRollout: under max-restarts, a release whose pod the
// kubelet cannot run fails the rollout as soon as its first pod shows it, without
// waiting for restarts to pile up: an image that cannot be pulled, a container
// config that cannot be built (in an init container), a container killed for
// memory. The condition and the Warning event name the pod, node, container and
// reason; the nodes not yet updated keep their pods.
func TestFailingContainerFailsTheRollout(t *testing.T) {
	tests := []struct {
		name      string
		fail      string
		init      bool
		container string
		words     string
	}{
		{name: "an image that cannot be pulled", fail: "ErrImagePull", container: "agent", words: "is waiting in ErrImagePull"},
		{name: "an init container's config", fail: "setup=CreateContainerConfigError", init: true, container: "setup", words: "is waiting in CreateContainerConfigError"},
		{name: "killed for memory", fail: "OOMKilled", container: "agent", words: "OOMKilled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := newNamespace(t)
			pool := map[string]string{"e2e/pool": ns}
			nodes := newNodes(t, 3, pool)
			ds := daemonSet(ns, "agent", pool)
			ds.Annotations = map[string]string{annMaxRestarts: "5"}
			createDaemonSet(t, ds)
			waitRolledOut(t, ns, "agent", 3)
			rev1 := waitRevisionHash(t, ns, "agent", 1)

			w := watchInvariants(t, ns, "app=agent", nodesOffRevision(nodes, rev1, 1), maxLivePodsPerNode(1))
			updateDaemonSet(t, ns, "agent", func(ds *apps.DaemonSet) {
				ds.Spec.Template.Spec.Containers[0].Image = imageV2
				ds.Spec.Template.Annotations = map[string]string{nodesim.AnnotationFail: tt.fail}
				if tt.init {
					ds.Spec.Template.Spec.InitContainers = []v1.Container{{Name: "setup", Image: "registry.k8s.io/pause:3.10"}}
				}
			})
			cond := waitProgressing(t, env.client, ns, "agent", v1.ConditionFalse, "PodContainerFailing")
			var failing *v1.Pod
			byNode := mustDaemonPods(t, ns, "agent")
			held := map[string]types.UID{}
			for node, pods := range byNode {
				if len(pods) != 1 {
					t.Fatalf("node %s has %d pods, want 1", node, len(pods))
				}
				if pods[0].Labels[apps.ControllerRevisionHashLabelKey] == rev1 {
					held[node] = pods[0].UID
				} else {
					failing = &pods[0]
				}
			}
			if failing == nil || len(held) != 2 {
				t.Fatalf("want one pod of the new revision and two of revision 1, got %v", podNames(byNode))
			}
			for _, word := range []string{"pod " + failing.Name, "on node " + failing.Spec.NodeName, "container " + tt.container, tt.words} {
				if !strings.Contains(cond.Message, word) {
					t.Errorf("condition message %q does not say %q", cond.Message, word)
				}
			}
			if ev := waitEvent(t, ns, "agent", "PodContainerFailing"); ev.Type != v1.EventTypeWarning || !strings.Contains(ev.Message, failing.Name) {
				t.Errorf("event = %s %q, want a Warning naming pod %s", ev.Type, ev.Message, failing.Name)
			}
			consistently(t, "the failed rollout holds the other nodes", 3*time.Second, keepsPods(ns, "agent", held))
			w.stop(t)
		})
	}
}
