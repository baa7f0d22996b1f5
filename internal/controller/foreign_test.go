package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/everynode/everynode/internal/daemon"
)

// otherController is the field manager of kube-controller-manager's writes.
const otherController = "kube-controller-manager"

// TestController_StandsDownWhenAnotherControllerWritesStatus: in full mode, another
// controller writing a DaemonSet's status makes everynode stop writing to it — no pod
// created or deleted any more — with a ControllerConflict condition and a Warning
// event that name the other field manager and the fix.
func TestController_StandsDownWhenAnotherControllerWritesStatus(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	nodes := h.createNodes("node", 3, nil)
	h.createDaemonSet(newDaemonSet("agent"))
	h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })

	ds := h.daemonSet("agent")
	ds.Status.NumberReady = 2 // what a second controller with a stale view would write
	if _, err := h.client.AppsV1().DaemonSets(testNamespace).UpdateStatus(h.ctx, ds, metav1.UpdateOptions{FieldManager: otherController}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the ControllerConflict condition", func() bool {
		c := conditionOf(h.daemonSet("agent"), ConditionControllerConflict)
		return c != nil && c.Status == v1.ConditionTrue
	})
	c := conditionOf(h.daemonSet("agent"), ConditionControllerConflict)
	for _, want := range []string{`field manager "kube-controller-manager"`, "wrote its status", "--controllers=*,-daemonset-controller", "--mode companion"} {
		if !containsString(c.Message, want) {
			t.Errorf("condition message %q does not say %q", c.Message, want)
		}
	}
	h.waitFor("the Warning event", func() bool { return len(h.events(ReasonControllerConflict)) == 1 })

	before := len(h.client.Actions())
	deletesBefore, createsBefore := h.countPodWrites()
	h.changeTemplate("agent", imageV2)
	h.createNode("node-new", nil)
	h.holdsFor(2*time.Second, "no pod write", func() bool {
		d, c := h.countPodWrites()
		return d == deletesBefore && c == createsBefore
	})
	if n := len(h.events(ReasonControllerConflict)); n != 1 {
		t.Errorf("%d ControllerConflict events, want one", n)
	}
	t.Logf("%d requests after standing down", len(h.client.Actions())-before)
}

// TestController_StandsDownWhenAnotherControllerCreatesAPod: a pod of the
// DaemonSet that another field manager creates while everynode runs shows a second
// controller at work; everynode leaves the duplicate to it and stands down.
func TestController_StandsDownWhenAnotherControllerCreatesAPod(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	nodes := h.createNodes("node", 2, nil)
	created := h.createDaemonSet(newDaemonSet("agent"))
	h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })
	h.holdsFor(500*time.Millisecond, "no conflict", func() bool {
		return conditionOf(h.daemonSet("agent"), ConditionControllerConflict) == nil
	})
	// The second controller's pod makes two on the node, which is its doing.
	h.inv.setLimits(created.UID, podLimits{perNode: 2, doubled: 1, unavailable: -1})

	ds := h.daemonSet("agent")
	pod := daemon.PodForNode(ds, daemon.PodTemplate(ds, h.currentHash(ds)), nodes[0])
	if _, err := h.client.CoreV1().Pods(testNamespace).Create(h.ctx, pod, metav1.CreateOptions{FieldManager: otherController}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the ControllerConflict condition", func() bool {
		c := conditionOf(h.daemonSet("agent"), ConditionControllerConflict)
		return c != nil && containsString(c.Message, "created pod")
	})
}

// Pods and status another controller wrote before everynode's caches synced (a
// takeover: that controller is off now) are no sign of a fight; writes after are.
func TestForeignWritesCountOnlyWritesSeenAsTheyHappen(t *testing.T) {
	f := newForeignWrites(FieldManager)
	at := func(sec int) *metav1.Time {
		t := metav1.NewTime(time.Date(2030, 1, 1, 0, 0, sec, 0, time.UTC))
		return &t
	}
	ds := newDaemonSet("agent")
	ds.UID = "ds-uid"
	ds.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: otherController, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: at(1)}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agent-old", UID: "pod-old", OwnerReferences: []metav1.OwnerReference{*daemon.ControllerRef(ds)},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: otherController, Operation: metav1.ManagedFieldsOperationUpdate,
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:ownerReferences":{}}}`)}}}}}

	// The initial list: the takeover's leftovers.
	f.observe(ds)
	f.observe(pod)
	if f.daemonSetSeen("default/agent", ds) || f.podAdded("default/agent", pod) {
		t.Fatal("objects from before the caches synced counted as a fight")
	}
	f.arm()
	if f.daemonSetSeen("default/agent", ds) {
		t.Error("a resync of an unchanged status counted as a fight")
	}
	if _, ok := f.contestedBy("default/agent"); ok {
		t.Fatal("contested before any new write")
	}
	// everynode's own status write is not a fight.
	ds.ManagedFields = append(ds.ManagedFields, metav1.ManagedFieldsEntry{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: at(2)})
	f.observe(ds)
	if f.daemonSetSeen("default/agent", ds) {
		t.Error("everynode's own status write counted as a fight")
	}
	// The other controller writes the status again: a fight.
	ds.ManagedFields[0].Time = at(3)
	f.observe(ds)
	if !f.daemonSetSeen("default/agent", ds) {
		t.Error("a new status write by another manager went unnoticed")
	}
	if w, ok := f.contestedBy("default/agent"); !ok || w.Manager != otherController {
		t.Errorf("contestedBy = %+v, %v", w, ok)
	}
	// An update of an old pod (its creator still another manager's) is no create,
	// and leaves nothing behind.
	f.observe(pod)
	f.podGone(pod.UID)
	if len(f.creators) != 0 {
		t.Errorf("%d pods remembered after their update was handled", len(f.creators))
	}
}

func TestCreatorOf(t *testing.T) {
	entry := func(manager, sub, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: sub,
			FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
	}
	tests := []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    string
	}{
		{name: "the manager that set the owner references", want: otherController, entries: []metav1.ManagedFieldsEntry{
			entry("kubelet", "status", `{"f:status":{}}`),
			entry(otherController, "", `{"f:metadata":{"f:ownerReferences":{}},"f:spec":{}}`),
		}},
		{name: "a status writer is not the creator", entries: []metav1.ManagedFieldsEntry{entry("kubelet", "status", `{"f:metadata":{"f:ownerReferences":{}}}`)}},
		{name: "no managed fields", entries: nil},
	}
	for _, tt := range tests {
		if got := creatorOf(tt.entries); got != tt.want {
			t.Errorf("%s: creatorOf = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// countPodWrites counts the pod deletes and creates the fake API received.
func (h *harness) countPodWrites() (deletes, creates int) {
	for _, a := range h.client.Actions() {
		switch {
		case a.Matches("delete", "pods"):
			deletes++
		case a.Matches("create", "pods"):
			creates++
		}
	}
	return deletes, creates
}

func conditionOf(ds *apps.DaemonSet, typ apps.DaemonSetConditionType) *apps.DaemonSetCondition {
	for i := range ds.Status.Conditions {
		if ds.Status.Conditions[i].Type == typ {
			return &ds.Status.Conditions[i]
		}
	}
	return nil
}

func containsString(s, sub string) bool { return strings.Contains(s, sub) }

// answerProbes plays another DaemonSet controller that answers everynode's probe:
// it writes the status of every probe DaemonSet it finds, as kube-controller-manager.
func answerProbes(ctx context.Context, client *fake.Clientset) {
	for ctx.Err() == nil {
		list, err := client.AppsV1().DaemonSets("").List(ctx, metav1.ListOptions{LabelSelector: LabelProbe + "=true"})
		if err == nil {
			for i := range list.Items {
				ds := &list.Items[i]
				if ds.Status.ObservedGeneration == 0 {
					ds.Status.ObservedGeneration = 1
					_, _ = client.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, ds, metav1.UpdateOptions{FieldManager: otherController})
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestController_ProbeAnsweredLeavesEveryDaemonSetAlone: another controller answers
// the probe at start, so everynode creates no pod for any DaemonSet, says why on
// each, and removes its probe.
func TestController_ProbeAnsweredLeavesEveryDaemonSetAlone(t *testing.T) {
	h := newHarness(t, harnessOptions{probe: 5 * time.Second, answerProbe: true})
	h.createNodes("node", 2, nil)
	h.createDaemonSet(newDaemonSet("agent"))
	h.waitFor("the ControllerConflict condition", func() bool {
		c := conditionOf(h.daemonSet("agent"), ConditionControllerConflict)
		return c != nil && strings.Contains(c.Message, "answered everynode's probe")
	})
	h.holdsFor(time.Second, "no pod created", func() bool { _, creates := h.countPodWrites(); return creates == 0 })
	h.checkNoProbeLeft()
}

// TestController_ProbeUnansweredGoesOn: nobody answers within the probe's timeout, so
// everynode manages the DaemonSets as usual, and the probe is gone.
func TestController_ProbeUnansweredGoesOn(t *testing.T) {
	h := newHarness(t, harnessOptions{probe: 300 * time.Millisecond})
	nodes := h.createNodes("node", 2, nil)
	h.createDaemonSet(newDaemonSet("agent"))
	h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })
	if c := conditionOf(h.daemonSet("agent"), ConditionControllerConflict); c != nil {
		t.Errorf("conflict reported with nobody answering the probe: %+v", c)
	}
	h.checkNoProbeLeft()
}

func (h *harness) checkNoProbeLeft() {
	h.t.Helper()
	list, err := h.client.AppsV1().DaemonSets("").List(h.ctx, metav1.ListOptions{LabelSelector: LabelProbe + "=true"})
	if err != nil {
		h.t.Fatal(err)
	}
	if len(list.Items) != 0 {
		h.t.Errorf("%d probe DaemonSets left behind", len(list.Items))
	}
	created := 0
	for _, a := range h.client.Actions() {
		if a.Matches("create", "daemonsets") {
			created++
		}
	}
	if created != 2 { // the probe and the test's DaemonSet
		h.t.Errorf("%d DaemonSets created, want the probe and the test's", created)
	}
}
