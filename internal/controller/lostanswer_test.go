package controller

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	clienttesting "k8s.io/client-go/testing"
)

// loseCreateAnswers makes the first n pod creates happen in the store while the
// controller gets an error back, as when the answer is lost on the way (a stream
// reset, a timeout): the write happened, the writer cannot know.
func (h *harness) loseCreateAnswers(n int32) *atomic.Int32 {
	var lost atomic.Int32
	h.client.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if lost.Load() >= n {
			return false, nil, nil
		}
		lost.Add(1)
		pod := a.(clienttesting.CreateAction).GetObject().(*v1.Pod).DeepCopy()
		pod.Name = fmt.Sprintf("%slost%d", pod.GenerateName, lost.Load())
		pod.UID = uuid.NewUUID()
		pod.CreationTimestamp = metav1.Now()
		pod.ResourceVersion = strconv.FormatInt(h.api.rv.Add(1), 10)
		pod.Status = v1.PodStatus{Phase: v1.PodPending}
		if err := h.client.Tracker().Create(podsResource, pod, pod.Namespace, metav1.CreateOptions{FieldManager: FieldManager}); err != nil {
			return true, nil, err
		}
		return true, nil, &url.Error{Op: "Post", URL: "https://apiserver/api/v1/namespaces/default/pods",
			Err: errors.New("stream error: stream ID 7; INTERNAL_ERROR; received from peer")}
	})
	return &lost
}

// A pod create whose answer is lost, while the pod watch is behind: the pod exists,
// the controller's cache does not show it yet, and the create returned an error. The
// controller must not create a second pod for that node (the invariant watcher
// fails the test if a node ever holds two).
func TestController_LostCreateAnswerCreatesNoSecondPod(t *testing.T) {
	h := newHarness(t, harnessOptions{podLag: time.Second})
	lost := h.loseCreateAnswers(3)
	nodes := h.createNodes("node", 3, nil)
	h.createDaemonSet(newDaemonSet("agent"))
	h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })
	if n := lost.Load(); n != 3 {
		t.Errorf("%d answers lost, want 3", n)
	}
}
