package nodesim

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
)

// harness runs a Simulator against a fake clientset on a fake clock.
type harness struct {
	t      *testing.T
	ctx    context.Context
	client *fake.Clientset
	clock  *testingclock.FakeClock
	sim    *Simulator
}

// startSimulator runs a Simulator with cfg (its Clock replaced by a fake one
// starting at t0) over the given objects, stopping it when the test ends.
func startSimulator(t *testing.T, cfg Config, objs ...runtime.Object) *harness {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	// The simple clientset keeps no managed fields, so the informers' transform never
	// writes to objects that the fake shares between its store and its watchers.
	h := &harness{t: t, ctx: ctx, client: fake.NewSimpleClientset(objs...), clock: testingclock.NewFakeClock(t0)}
	cfg.Clock = h.clock
	if cfg.Workers == 0 {
		cfg.Workers = 2
	}
	sim := New(h.client, cfg)
	h.sim = sim
	done := make(chan error, 1)
	go func() { done <- sim.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v", err)
		}
	})
	return h
}

// eventually waits, in real time, for cond to hold.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	err := wait.PollUntilContextTimeout(h.ctx, 2*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		h.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// advanceUntil steps the fake clock by step until cond holds, giving the workers a
// moment of real time after each step, and returns the fake time it took.
func (h *harness) advanceUntil(what string, step time.Duration, cond func() bool) time.Duration {
	h.t.Helper()
	start := h.clock.Now()
	for range 2000 {
		if h.settles(cond) {
			return h.clock.Since(start)
		}
		h.clock.Step(step)
	}
	h.t.Fatalf("%s did not happen within %v of simulated time", what, h.clock.Since(start))
	return 0
}

// holds steps the fake clock by step n times and fails if cond ever stops holding.
func (h *harness) holds(what string, step time.Duration, n int, cond func() bool) {
	h.t.Helper()
	for range n {
		h.clock.Step(step)
		time.Sleep(5 * time.Millisecond)
		if !cond() {
			h.t.Fatalf("%s stopped holding at %v", what, h.clock.Now().Sub(t0))
		}
	}
}

// simSees waits, in real time, until the simulator's cache holds node name in a
// state cond accepts.
func (h *harness) simSees(name string, cond func(*v1.Node) bool) {
	h.t.Helper()
	h.eventually("the simulator to see node "+name+" change", func() bool {
		node, err := h.sim.nodes.Get(name)
		return err == nil && cond(node)
	})
}

// settles reports whether cond holds within a short real-time wait.
func (h *harness) settles(cond func() bool) bool {
	deadline := time.Now().Add(20 * time.Millisecond)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

func (h *harness) node(name string) *v1.Node {
	n, err := h.client.CoreV1().Nodes().Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return n
}

func (h *harness) pod(name string) *v1.Pod {
	p, err := h.client.CoreV1().Pods("default").Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return p
}

func (h *harness) createPod(pod *v1.Pod) {
	h.t.Helper()
	if _, err := h.client.CoreV1().Pods(pod.Namespace).Create(h.ctx, pod, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) updatePod(pod *v1.Pod) {
	h.t.Helper()
	if _, err := h.client.CoreV1().Pods(pod.Namespace).Update(h.ctx, pod, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// boundPod is a pod already bound to the given node.
func boundPod(name, node string, annotations map[string]string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), Annotations: annotations},
		Spec: v1.PodSpec{
			NodeName:   node,
			Containers: []v1.Container{{Name: "app", Image: "registry.example/app:1.0"}},
		},
	}
}

func phaseIs(p *v1.Pod, phase v1.PodPhase) bool { return p != nil && p.Status.Phase == phase }

func readyIs(p *v1.Pod, ready bool) bool { return p != nil && podReady(&p.Status) == ready }
