package controller

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/everynode/everynode/internal/daemon"
)

func TestController_ConvergesToOnePodPerEligibleNode(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	nodes := h.createNodes("node", 5, nil)
	h.createDaemonSet(newDaemonSet("agent"))
	h.waitFor("one Ready pod per node", func() bool { return h.converged("agent", nodes) })

	ds := h.daemonSet("agent")
	want := apps.DaemonSetStatus{
		ObservedGeneration: 1, DesiredNumberScheduled: 5, CurrentNumberScheduled: 5, NumberReady: 5,
		NumberAvailable: 5, UpdatedNumberScheduled: 5,
	}
	if !reflect.DeepEqual(ds.Status, want) {
		t.Errorf("status = %+v, want %+v", ds.Status, want)
	}

	revs := h.revisionsOf(ds)
	if len(revs) != 1 {
		t.Fatalf("got %d ControllerRevisions, want 1", len(revs))
	}
	patch, err := daemon.TemplatePatch(&ds.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(revs[0].Data.Raw, patch) {
		t.Errorf("revision data = %s, want TemplatePatch(template) = %s", revs[0].Data.Raw, patch)
	}
	hash := revs[0].Labels[daemon.HashLabel]
	if hash == "" || revs[0].Name != "agent-"+hash || revs[0].Revision != 1 {
		t.Errorf("revision %s (number %d, hash %q): want agent-<hash>, number 1", revs[0].Name, revs[0].Revision, hash)
	}

	for _, pod := range h.podsOf(ds) {
		if got := pod.Labels[daemon.HashLabel]; got != hash {
			t.Errorf("pod %s: %s = %q, want %q", pod.Name, daemon.HashLabel, got, hash)
		}
		if got := pod.Labels[daemon.TemplateGenerationLabel]; got != "1" {
			t.Errorf("pod %s: %s = %q, want \"1\"", pod.Name, daemon.TemplateGenerationLabel, got)
		}
		if pod.Labels["app"] != "agent" || !strings.HasPrefix(pod.Name, "agent-") {
			t.Errorf("pod %s: labels %v: want the template's, and a name prefixed agent-", pod.Name, pod.Labels)
		}
		wantRef := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: ds.UID,
			Controller: new(true), BlockOwnerDeletion: new(true)}
		if len(pod.OwnerReferences) != 1 || !reflect.DeepEqual(pod.OwnerReferences[0], wantRef) {
			t.Errorf("pod %s: ownerReferences = %+v, want [%+v]", pod.Name, pod.OwnerReferences, wantRef)
		}
	}

	created := h.api.CreatedPods()
	if len(created) != 5 {
		t.Fatalf("%d pods were created, want 5", len(created))
	}
	pinned := map[string]bool{}
	for _, pod := range created {
		if pod.Spec.NodeName != "" {
			t.Errorf("pod %s was created bound to %s; it must be left to the scheduler", pod.Name, pod.Spec.NodeName)
		}
		node := pinnedNode(t, pod)
		if pinned[node] {
			t.Errorf("two pods were created for node %s", node)
		}
		pinned[node] = true
	}
	for _, n := range nodes {
		if !pinned[n] {
			t.Errorf("no pod was created for node %s", n)
		}
	}

	h.waitFor("a SuccessfulCreate event per pod", func() bool { return len(h.events(daemon.EventSuccessfulCreate)) == 5 })
	for _, e := range h.events(daemon.EventSuccessfulCreate) {
		if e.Type != v1.EventTypeNormal || e.Source.Component != EventSource || e.InvolvedObject.UID != ds.UID ||
			!strings.HasPrefix(e.Message, "Created pod: agent-") {
			t.Errorf("event %+v: want a Normal event from %s on the DaemonSet saying which pod was created", e, EventSource)
		}
	}
}

// pinnedNode checks that pod's required node affinity is exactly the single term
// `matchFields metadata.name In [node]`, and returns node.
func pinnedNode(t *testing.T, pod *v1.Pod) string {
	t.Helper()
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		t.Fatalf("pod %s has no required node affinity", pod.Name)
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchExpressions) != 0 || len(terms[0].MatchFields) != 1 {
		t.Fatalf("pod %s: node selector terms %+v, want one matchFields requirement", pod.Name, terms)
	}
	req := terms[0].MatchFields[0]
	if req.Key != metav1.ObjectNameField || req.Operator != v1.NodeSelectorOpIn || len(req.Values) != 1 {
		t.Fatalf("pod %s: requirement %+v, want metadata.name In [node]", pod.Name, req)
	}
	return req.Values[0]
}

func TestController_ConvergesDespiteAPIFaults(t *testing.T) {
	// A small burst cap makes convergence take many syncs, each meeting faults. A
	// failed sync is retried with the work queue's per-DaemonSet exponential
	// back-off (as upstream's): at 30% a write, most syncs of six writes fail, and a
	// run of a dozen failed syncs backs off past the test's wait. At 15% each kind
	// of fault still comes many times. Each kind draws its own sequence: seed 104
	// fails the 3rd, 5th and 6th pod create, the 2nd, 3rd and 6th delete and the
	// 1st, 3rd and 10th status update, so every kind meets faults however the
	// controller's goroutines interleave.
	h := newHarness(t, harnessOptions{burst: 8, faults: faults{PodCreate: 0.15, PodDelete: 0.15, StatusUpdate: 0.15, Seed: 104}})
	nodes := h.createNodes("node", 20, nil)
	ds := newDaemonSet("agent")
	ds.Spec.UpdateStrategy = rollingUpdate(5, 0)
	ds = h.createDaemonSet(ds)
	h.waitForWithin(2*waitTimeout, "one pod per node despite faults", func() bool { return h.converged("agent", nodes) })
	if n := len(h.podsOf(ds)); n != 20 {
		t.Errorf("%d pods, want 20", n)
	}

	// A rollout deletes every pod, so deletes meet faults too.
	h.changeTemplate("agent", func(t *v1.PodTemplateSpec) { t.Spec.Containers[0].Image = "example.com/agent:v2" })
	h.waitForWithin(2*waitTimeout, "the rollout to finish despite faults", func() bool { return h.converged("agent", nodes) })
	if n := len(h.podsOf(ds)); n != 20 {
		t.Errorf("%d pods, want 20", n)
	}

	injected := h.api.InjectedFaults()
	for _, kind := range []string{"pod create", "pod delete", "status update"} {
		if injected[kind] == 0 {
			t.Errorf("no %s fault was injected (%v): the test did not test what it claims", kind, injected)
		}
	}
	if len(h.events(daemon.EventFailedCreate)) == 0 {
		t.Errorf("no FailedCreate event was recorded")
	}
}

func TestController_FollowsNodeLabels(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	worker := map[string]string{"role": "worker"}
	for _, n := range []string{"node-0", "node-1", "node-2"} {
		h.createNode(n, worker)
	}
	h.createNode("node-3", nil)
	ds := newDaemonSet("agent")
	ds.Spec.Template.Spec.NodeSelector = worker
	ds = h.createDaemonSet(ds)
	h.waitFor("pods on the three workers", func() bool { return h.converged("agent", []string{"node-0", "node-1", "node-2"}) })
	kept := h.podsByNode(ds)["node-0"][0].UID
	incremental := h.ctrl.metrics.decisions.WithLabelValues("incremental")
	before := testutil.ToFloat64(incremental)

	h.updateNode("node-1", func(n *v1.Node) { n.Labels["role"] = "database" })
	h.waitFor("node-1's pod gone and desired 2", func() bool { return h.converged("agent", []string{"node-0", "node-2"}) })

	h.updateNode("node-3", func(n *v1.Node) { n.Labels["role"] = "worker" })
	h.waitFor("a pod on node-3 and desired 3", func() bool { return h.converged("agent", []string{"node-0", "node-2", "node-3"}) })

	if got := h.podsByNode(ds)["node-0"][0].UID; got != kept {
		t.Errorf("node-0's pod was replaced (%s -> %s) though node-0 never changed", kept, got)
	}
	// A node moving out of or into the selector is one node's work: the syncs that
	// delete and create its pod are decided from the memo.
	if n := testutil.ToFloat64(incremental) - before; n < 2 {
		t.Errorf("%v decisions of the two moves were incremental, want at least 2", n)
	}
}

func TestController_NoExecuteTaintEvictsNoScheduleTaintKeeps(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	nodes := h.createNodes("node", 4, nil)
	ds := h.createDaemonSet(newDaemonSet("agent"))
	h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })

	evict := v1.Taint{Key: "example.com/evict", Effect: v1.TaintEffectNoExecute}
	h.updateNode("node-0", func(n *v1.Node) { n.Spec.Taints = append(n.Spec.Taints, evict) })
	h.waitFor("node-0's pod evicted", func() bool { return h.converged("agent", nodes[1:]) })

	kept := h.podsByNode(ds)["node-1"][0].UID
	dedicated := v1.Taint{Key: "example.com/dedicated", Value: "db", Effect: v1.TaintEffectNoSchedule}
	h.updateNode("node-1", func(n *v1.Node) { n.Spec.Taints = append(n.Spec.Taints, dedicated) })
	// Upstream semantics: a node that should not run the pod but has one counts as
	// misscheduled, and not in desired, current, ready or available.
	misscheduled := func() bool {
		s := h.daemonSet("agent").Status
		pods := h.podsByNode(ds)["node-1"]
		return s.DesiredNumberScheduled == 2 && s.CurrentNumberScheduled == 2 && s.NumberMisscheduled == 1 &&
			s.NumberReady == 2 && s.NumberAvailable == 2 && s.UpdatedNumberScheduled == 2 && s.NumberUnavailable == 0 &&
			len(pods) == 1 && pods[0].UID == kept
	}
	h.waitFor("node-1's pod kept and counted misscheduled", misscheduled)
	h.holdsFor(300*time.Millisecond, "node-1's pod kept", misscheduled)

	for _, n := range []string{"node-0", "node-1"} {
		h.updateNode(n, func(n *v1.Node) { n.Spec.Taints = nil })
	}
	h.waitFor("every node served again", func() bool { return h.converged("agent", nodes) })
	if got := h.podsByNode(ds)["node-1"][0].UID; got != kept {
		t.Errorf("node-1's pod was replaced (%s -> %s); a NoSchedule taint must not evict it", kept, got)
	}
}

func TestController_ReplacesFailedPodAfterBackoff(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	nodes := h.createNodes("node", 2, nil)
	ds := h.createDaemonSet(newDaemonSet("agent"))
	h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })

	first := h.podsByNode(ds)["node-0"][0]
	h.failPod(first.Name)
	second := h.waitForReplacement(ds, "node-0", first.UID)
	firstGone, ok := h.api.DeletedTime(first.UID)
	if !ok {
		t.Fatalf("failed pod %s was replaced without being deleted", first.Name)
	}
	h.waitFor("a FailedDaemonPod warning", func() bool {
		events := h.events(daemon.EventFailedDaemonPod)
		return len(events) > 0 && events[0].Type == v1.EventTypeWarning && strings.Contains(events[0].Message, first.Name)
	})

	// The replacement fails at once: it is left alone until the node's backoff (1s
	// after the first deletion) ends.
	h.failPod(second.Name)
	h.waitForWithin(5*time.Second, "the failed replacement deleted", func() bool {
		_, ok := h.api.DeletedTime(second.UID)
		return ok
	})
	secondGone, _ := h.api.DeletedTime(second.UID)
	if gap := secondGone.Sub(firstGone); gap < 900*time.Millisecond {
		t.Errorf("the failed replacement was deleted %v after the first failed pod; want it held by the 1s backoff", gap)
	}
	h.waitForReplacement(ds, "node-0", second.UID)
	h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })
}

// failPod reports the pod Failed, as its kubelet would.
func (h *harness) failPod(name string) {
	h.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := h.client.CoreV1().Pods(testNamespace).Get(h.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod.Status.Phase = v1.PodFailed
		for i := range pod.Status.Conditions {
			if pod.Status.Conditions[i].Type == v1.PodReady {
				pod.Status.Conditions[i].Status = v1.ConditionFalse
				pod.Status.Conditions[i].LastTransitionTime = metav1.Now()
			}
		}
		_, err = h.client.CoreV1().Pods(testNamespace).UpdateStatus(h.ctx, pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		h.t.Fatalf("failing pod %s: %v", name, err)
	}
}

// waitForReplacement waits until node's only pod of ds is a Running one other than
// the pod with UID old, and returns it.
func (h *harness) waitForReplacement(ds *apps.DaemonSet, node string, old types.UID) v1.Pod {
	h.t.Helper()
	var found v1.Pod
	h.waitFor("a Running replacement on "+node, func() bool {
		pods := h.podsByNode(ds)[node]
		if len(pods) == 1 && pods[0].UID != old && isRunningReady(&pods[0]) {
			found = pods[0]
			return true
		}
		return false
	})
	return found
}
