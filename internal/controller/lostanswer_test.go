package controller

import (
	"errors"
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	clienttesting "k8s.io/client-go/testing"
)

// brokenStream is the error client-go returns when the stream of a request is reset
// after the request went out: its outcome is unknown.
func brokenStream(method, path string) error {
	return &url.Error{Op: method, URL: "https://apiserver" + path, Err: errors.New("stream error: stream ID 7; INTERNAL_ERROR; received from peer")}
}

// loseCreateAnswers fails the first n pod creates with a broken stream; when carry is
// set they happen in the store all the same (their answer was lost), else they never
// reached the API server (the request was).
func (h *harness) loseCreateAnswers(n int32, carry bool) *atomic.Int32 {
	var lost atomic.Int32
	h.prependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if lost.Load() >= n {
			return false, nil, nil
		}
		lost.Add(1)
		if carry {
			pod := a.(clienttesting.CreateAction).GetObject().(*v1.Pod).DeepCopy()
			pod.Name = fmt.Sprintf("%slost%d", pod.GenerateName, lost.Load())
			pod.UID = uuid.NewUUID()
			pod.CreationTimestamp = metav1.Now()
			pod.ResourceVersion = h.api.NextResourceVersion()
			pod.Status = v1.PodStatus{Phase: v1.PodPending}
			if err := h.client.Tracker().Create(podsResource, pod, pod.Namespace, metav1.CreateOptions{FieldManager: FieldManager}); err != nil {
				return true, nil, err
			}
		}
		return true, nil, brokenStream("Post", "/api/v1/namespaces/default/pods")
	})
	return &lost
}

// Pod creates that fail with a broken stream while the pod watch is behind. When the
// pod was created all the same (its answer was lost), the cache does not show it yet:
// the controller must not create a second pod for that node (the invariant watcher
// fails the test if a node ever holds two). When it was not (the request was lost),
// the node gets its pod at once, not after the wait for a write that might yet show
// up (unknownOutcomeTTL, longer than this test's wait).
func TestController_LostCreates(t *testing.T) {
	for _, carried := range []bool{true, false} {
		t.Run(fmt.Sprintf("carried_out=%t", carried), func(t *testing.T) {
			h := newHarness(t, harnessOptions{podLag: time.Second})
			lost := h.loseCreateAnswers(3, carried)
			nodes := h.createNodes("node", 3, nil)
			h.createDaemonSet(newDaemonSet("agent"))
			h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })
			if n := lost.Load(); n != 3 {
				t.Errorf("%d creates failed, want 3", n)
			}
		})
	}
}

// Pod deletes whose answers are lost, while the pod watch is behind: the deleted pod
// still looks alive in the cache. The API server says it is gone, and the controller
// waits for the cache to show that instead of sending the delete again; the budget
// holds throughout.
func TestController_LostDeleteAnswerIsNotSentAgain(t *testing.T) {
	h := newHarness(t, harnessOptions{podLag: 500 * time.Millisecond})
	nodes := h.createNodes("node", 4, nil)
	ds := h.createDaemonSet(newDaemonSet("agent"))
	h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })
	var lost, sent atomic.Int32
	h.prependReactor("delete", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		sent.Add(1)
		if lost.Load() >= 2 {
			return false, nil, nil
		}
		lost.Add(1)
		// Carried out in the store, then the answer is lost.
		name := a.(clienttesting.DeleteAction).GetName()
		if err := h.client.Tracker().Delete(podsResource, a.GetNamespace(), name); err != nil {
			return true, nil, err
		}
		return true, nil, brokenStream("Delete", "/api/v1/namespaces/default/pods/"+name)
	})
	h.inv.setLimits(ds.UID, podLimits{perNode: 1, unavailable: 1, nodes: nodes})
	h.changeTemplate("agent", imageV2)
	h.waitForWithin(20*time.Second, "the rollout", func() bool {
		return h.converged("agent", nodes) && h.podsOf(ds)[0].Spec.Containers[0].Image == "example.com/agent:v2"
	})
	if n := lost.Load(); n != 2 {
		t.Errorf("%d delete answers lost, want 2", n)
	}
	if n := sent.Load(); n != int32(len(nodes)) {
		t.Errorf("%d pod deletes sent for a rollout over %d nodes, want one each", n, len(nodes))
	}
}
