package inspect

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/everynode/everynode/internal/daemon"
)

// syncBuffer is an output the test may read while Status writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits until the output contains want.
func (s *syncBuffer) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.String(), want) {
		if time.Now().After(deadline) {
			t.Errorf("output never showed %q:\n%s", want, s.String())
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func opts(out *syncBuffer) StatusOptions {
	return StatusOptions{Watch: true, Timeout: 20 * time.Second, Out: out, Refresh: 50 * time.Millisecond,
		Now: func() time.Time { return t0 }}
}

func withCounts(ds *apps.DaemonSet, desired, updated, available int32) *apps.DaemonSet {
	ds.Status.DesiredNumberScheduled, ds.Status.UpdatedNumberScheduled, ds.Status.NumberAvailable = desired, updated, available
	return ds
}

func setStatus(t *testing.T, client *fake.Clientset, change func(*apps.DaemonSet)) {
	t.Helper()
	ds := getDS(t, client, "agent")
	change(ds)
	if _, err := client.AppsV1().DaemonSets(ns).UpdateStatus(context.Background(), ds, metav1.UpdateOptions{}); err != nil {
		t.Error(err)
	}
}

func TestStatusComplete(t *testing.T) {
	client := fake.NewClientset(withCounts(newDS("agent", nil), 3, 3, 3))
	var out syncBuffer
	if err := Status(context.Background(), client, ns, "agent", opts(&out)); err != nil {
		t.Fatal(err)
	}
	want := "daemonset/agent: 3 of 3 updated, 3 of 3 available\ndaemonset \"agent\" successfully rolled out\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}

// Status follows the DaemonSet: a line per change, until the controller has seen the
// latest generation and every node runs an available pod of it.
func TestStatusFollowsTheRollout(t *testing.T) {
	ds := withCounts(newDS("agent", map[string]string{daemon.AnnotationMaxRestarts: "3"}), 3, 3, 3)
	ds.Generation = 2 // the template changed; the controller has not seen it yet
	client := fake.NewClientset(ds)
	var out syncBuffer
	done := make(chan error)
	go func() { done <- Status(context.Background(), client, ns, "agent", opts(&out)) }()

	out.waitFor(t, "daemonset/agent: 3 of 3 updated, 3 of 3 available (the controller has not seen generation 2 yet)\n")
	setStatus(t, client, func(ds *apps.DaemonSet) {
		ds.Status.ObservedGeneration, ds.Status.UpdatedNumberScheduled, ds.Status.NumberAvailable = 2, 1, 2
		ds.Status.Conditions = []apps.DaemonSetCondition{progressing(v1.ConditionTrue, daemon.ReasonRollingOut, "rolling out revision 2")}
	})
	out.waitFor(t, "daemonset/agent: 1 of 3 updated, 2 of 3 available; Progressing True/RollingOut: rolling out revision 2\n")
	setStatus(t, client, func(ds *apps.DaemonSet) { ds.Status.UpdatedNumberScheduled, ds.Status.NumberAvailable = 3, 3 })
	if err := <-done; err != nil {
		t.Fatalf("Status = %v\n%s", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || lines[2] != "daemonset/agent: 3 of 3 updated, 3 of 3 available; Progressing True/RollingOut: rolling out revision 2" ||
		lines[3] != `daemonset "agent" successfully rolled out` {
		t.Errorf("a line per change, then success:\n%s", out.String())
	}
}

// failedCluster: revision 2 of agent failed its progress deadline on node-1, as the
// controller recorded on the revision and in the condition.
func failedCluster(t *testing.T, markFailed bool) *fake.Clientset {
	ds := newDS("agent", map[string]string{daemon.AnnotationProgressDeadline: "5m"})
	rev1, h1 := revision(t, ds, 1)
	ds.Spec.Template.Spec.Containers[0].Image = "img:v2"
	ds.Generation, ds.Status.ObservedGeneration = 2, 2
	rev2, h2 := revision(t, ds, 2)
	msg := "no pod of the new revision became available for 5m0s; pod agent-1 on node node-1 is still not available"
	if markFailed {
		rev2.Annotations = map[string]string{daemon.MarkFailed: "2 ProgressDeadlineExceeded: " + msg}
	}
	withCounts(ds, 2, 1, 1)
	ds.Status.Conditions = []apps.DaemonSetCondition{progressing(v1.ConditionFalse, daemon.ReasonProgressDeadlineExceeded,
		"revision 2 failed: "+msg+"; the rollout holds until the template changes or `everynode rollout resume` runs")}
	return fake.NewClientset(ds, rev1, rev2, newNode("node-1", "role", "worker"), newNode("node-2", "role", "worker"),
		newPod(ds, "agent-1", h2, "node-1", false), newPod(ds, "agent-2", h1, "node-2", true))
}

func TestStatusFailed(t *testing.T) {
	var out syncBuffer
	err := Status(context.Background(), failedCluster(t, true), ns, "agent", opts(&out))
	want := "rollout of daemonset/agent failed: ProgressDeadlineExceeded: revision 2 failed: no pod of the new revision became available for 5m0s"
	if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("err = %v\nwant one line starting %q", err, want)
	}
}

// A False condition that the controller's rules no longer support (the failure mark
// was removed by `rollout resume` and the controller has not written since) does not
// end the watch.
func TestStatusStaleFailure(t *testing.T) {
	var out syncBuffer
	o := opts(&out)
	o.Watch = false
	if err := Status(context.Background(), failedCluster(t, false), ns, "agent", o); err != nil {
		t.Fatalf("err = %v", err)
	}
	if !strings.HasPrefix(out.String(), "daemonset/agent: 1 of 2 updated, 1 of 2 available; Progressing False/ProgressDeadlineExceeded") {
		t.Errorf("output: %s", out.String())
	}
}

func TestStatusInvalidAnnotation(t *testing.T) {
	ds := withCounts(newDS("agent", map[string]string{daemon.AnnotationWavePause: "soon"}), 1, 1, 1)
	rev, h := revision(t, ds, 1)
	ds.Status.Conditions = []apps.DaemonSetCondition{progressing(v1.ConditionFalse, daemon.ReasonInvalidAnnotation, "stored")}
	client := fake.NewClientset(ds, rev, newNode("node-1", "role", "worker"), newPod(ds, "agent-1", h, "node-1", true))
	var out syncBuffer
	err := Status(context.Background(), client, ns, "agent", opts(&out))
	if err == nil || !strings.HasPrefix(err.Error(), `rollout of daemonset/agent failed: InvalidAnnotation: annotation rollout.everynode.dev/wave-pause="soon"`) {
		t.Errorf("err = %v", err)
	}
}

func TestStatusTimeout(t *testing.T) {
	ds := withCounts(newDS("agent", map[string]string{daemon.AnnotationPaused: "true"}), 3, 1, 3)
	ds.Status.Conditions = []apps.DaemonSetCondition{progressing(v1.ConditionUnknown, daemon.ReasonPaused, "revision 2 is paused")}
	var out syncBuffer
	o := opts(&out)
	o.Timeout = 200 * time.Millisecond
	err := Status(context.Background(), fake.NewClientset(ds), ns, "agent", o)
	want := "timed out after 200ms waiting for the rollout of daemonset/agent: 1 of 3 updated, 3 of 3 available (Progressing Unknown/Paused: revision 2 is paused); raise --timeout to wait longer"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}

func TestStatusWaves(t *testing.T) {
	client, _ := wavesCluster(t)
	var out syncBuffer
	o := opts(&out)
	o.Watch = false
	if err := Status(context.Background(), client, ns, "agent", o); err != nil {
		t.Fatal(err)
	}
	want := "daemonset/agent: 2 of 3 updated, 2 of 3 available; Progressing True/RollingOut: rolling out revision 2; " +
		"waves by zone: b 2 nodes 2 updated 1 available, a 1 nodes 0 updated 0 available; unavailable: 1 Starting\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}

// On a terminal the progress is redrawn in place, with a bar and a line per wave.
func TestStatusTerminal(t *testing.T) {
	client, _ := wavesCluster(t)
	var out syncBuffer
	o := opts(&out)
	o.Terminal = true
	done := make(chan error)
	go func() { done <- Status(context.Background(), client, ns, "agent", o) }()
	first := "daemonset/agent [####################..........] 2/3 updated, 2/3 available\n" +
		"  Progressing True/RollingOut: rolling out revision 2\n" +
		"  wave zone=b: 2 nodes, 2 updated, 1 available\n" +
		"  wave zone=a: 1 nodes, 0 updated, 0 available"
	out.waitFor(t, first)
	setStatus(t, client, func(ds *apps.DaemonSet) {
		ds.Status.UpdatedNumberScheduled, ds.Status.NumberAvailable = 3, 3
		ds.Status.Conditions = []apps.DaemonSetCondition{progressing(v1.ConditionTrue, daemon.ReasonNewRevisionAvailable, "revision 2 is available on every node")}
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rest := strings.TrimPrefix(out.String(), first)
	if !strings.HasPrefix(rest, "\r\x1b[3A\x1b[J"+"daemonset/agent [##############################] 3/3 updated, 3/3 available\n") ||
		!strings.HasSuffix(rest, "\ndaemonset \"agent\" successfully rolled out\n") {
		t.Errorf("redraw: %q", rest)
	}
}

func TestStatusDeleted(t *testing.T) {
	client := fake.NewClientset(withCounts(newDS("agent", nil), 3, 0, 0))
	var out syncBuffer
	done := make(chan error)
	go func() { done <- Status(context.Background(), client, ns, "agent", opts(&out)) }()
	out.waitFor(t, "0 of 3 updated")
	if err := client.AppsV1().DaemonSets(ns).Delete(context.Background(), "agent", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil || err.Error() != "daemonset/agent was deleted from namespace prod" {
		t.Errorf("err = %v", err)
	}
}

func TestStatusOnDelete(t *testing.T) {
	ds := newDS("agent", nil)
	ds.Spec.UpdateStrategy = apps.DaemonSetUpdateStrategy{Type: apps.OnDeleteDaemonSetStrategyType}
	var out syncBuffer
	err := Status(context.Background(), fake.NewClientset(ds), ns, "agent", opts(&out))
	if err == nil || !strings.Contains(err.Error(), "updateStrategy OnDelete, which has no rollout to follow") {
		t.Errorf("err = %v", err)
	}
}

// An OnDelete DaemonSet that everynode rolls out (max-unavailable) is followed like a
// RollingUpdate, from the counters the cluster's own controller keeps.
func TestStatusCompanionOnDelete(t *testing.T) {
	ds := withCounts(newDS("agent", map[string]string{daemon.AnnotationMaxUnavailable: "1"}), 3, 2, 3)
	ds.Spec.UpdateStrategy = apps.DaemonSetUpdateStrategy{Type: apps.OnDeleteDaemonSetStrategyType}
	client := fake.NewClientset(ds)
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- Status(context.Background(), client, ns, "agent", opts(&out)) }()
	out.waitFor(t, "2 of 3 updated")
	setStatus(t, client, func(ds *apps.DaemonSet) { withCounts(ds, 3, 3, 3) })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `daemonset "agent" successfully rolled out`) {
		t.Errorf("output:\n%s", out.String())
	}
}

// A watch that times out says why the unavailable nodes are so, read once at the end.
func TestStatusTimeoutSaysWhyUnavailable(t *testing.T) {
	client, _ := wavesCluster(t)
	var out syncBuffer
	o := opts(&out)
	o.Timeout = 200 * time.Millisecond
	err := Status(context.Background(), client, ns, "agent", o)
	if err == nil || !strings.Contains(err.Error(), "2 of 3 available; unavailable: 1 Starting (Progressing True/RollingOut") {
		t.Errorf("err = %v, want the timeout to count the unavailable node as Starting", err)
	}
}
