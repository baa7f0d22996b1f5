package controller

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"

	"github.com/everynode/everynode/internal/daemon"
	"github.com/everynode/everynode/internal/fakeapi"
)

const (
	testNamespace = "default"
	pollInterval  = 20 * time.Millisecond
	waitTimeout   = 10 * time.Second
)

// harness runs a Controller with two workers against a fake clientset made to behave
// like an API server (see internal/fakeapi), with a pod invariant watcher. It plays the
// scheduler and kubelets itself, in step, which waitFor calls on every poll.
type harness struct {
	t      *testing.T
	ctx    context.Context
	client *fake.Clientset
	api    *fakeapi.API
	inv    *invariants
	ctrl   *Controller
	// builtin, in companion mode, plays the cluster's own DaemonSet controller.
	builtin *builtinPlacement
}

type harnessOptions struct {
	faults faults
	burst  int
	// statusInterval and statusHold are the controller's MinStatusInterval and
	// MaxStatusHold.
	statusInterval, statusHold time.Duration
	// batch is the controller's SyncBatchPeriod; zero means DefaultSyncBatchPeriod
	// and a negative value none.
	batch time.Duration
	// probe is the controller's ProbeTimeout; answerProbe makes the harness answer
	// the probe as another DaemonSet controller would.
	probe       time.Duration
	answerProbe bool
	// mode is the controller's Mode. In companion mode the harness also plays the
	// cluster's own DaemonSet controller (builtinPlacement).
	mode string
	// daemonSetLag and podLag delay every DaemonSet, or pod, watch event by that
	// much (lagWatches).
	daemonSetLag, podLag time.Duration
	// limiter and writers are the controller's RateLimiter and PodWriters.
	limiter flowcontrol.RateLimiter
	writers int
	// nodeGate is the controller's NodeGate.
	nodeGate bool
}

func newHarness(t *testing.T, opts harnessOptions) *harness {
	t.Helper()
	logger := testr.NewWithOptions(t, testr.Options{Verbosity: 2})
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	client := fake.NewClientset()
	api := fakeapi.Install(client, fakeapi.Options{Faults: opts.faults, Record: true})
	if opts.daemonSetLag > 0 {
		lagWatches(client, "daemonsets", opts.daemonSetLag)
	}
	if opts.podLag > 0 {
		lagWatches(client, "pods", opts.podLag)
	}
	inv, err := watchInvariants(ctx, client, api)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	if opts.batch == 0 {
		opts.batch = DefaultSyncBatchPeriod
	}
	if opts.answerProbe {
		go answerProbes(ctx, client)
	}
	ctrl, err := New(ctx, client, factory, Options{Mode: opts.mode, ProbeTimeout: opts.probe, BurstReplicas: opts.burst, MinStatusInterval: opts.statusInterval, MaxStatusHold: opts.statusHold, SyncBatchPeriod: opts.batch,
		RateLimiter: opts.limiter, PodWriters: opts.writers, NodeGate: opts.nodeGate})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	runDone := make(chan error, 1)
	go func() { runDone <- ctrl.Run(ctx, 2) }()
	t.Cleanup(func() {
		cancel()
		if err := <-runDone; err != nil {
			t.Errorf("Run: %v", err)
		}
		factory.Shutdown()
		inv.stop()
		for _, v := range inv.violated() {
			t.Errorf("invariant violated: %s", v)
		}
	})
	h := &harness{t: t, ctx: ctx, client: client, api: api, inv: inv, ctrl: ctrl}
	if opts.mode == ModeCompanion {
		h.builtin = &builtinPlacement{h: h}
	}
	h.waitFor("the controller to be ready", ctrl.Ready)
	return h
}

// annotationNeverReady on a pod template makes the harness's kubelets report its pods
// Running but never Ready: a bad release.
const annotationNeverReady = "harness.everynode.dev/never-ready"

// step plays the scheduler and the kubelets once: every pending pod is bound to the
// node its affinity pins it to (if that node exists) and reported Running and Ready
// (not Ready, for annotationNeverReady).
func (h *harness) step() {
	if h.builtin != nil {
		h.builtin.step()
	}
	pods, err := h.client.CoreV1().Pods("").List(h.ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Status.Phase == v1.PodRunning && pod.DeletionTimestamp == nil {
			h.restartChangedContainers(pod)
			continue
		}
		if pod.Status.Phase != v1.PodPending || pod.DeletionTimestamp != nil {
			continue
		}
		if pod.Spec.NodeName == "" {
			node, ok := daemon.TargetNode(pod)
			if !ok {
				continue
			}
			if _, err := h.client.CoreV1().Nodes().Get(h.ctx, node, metav1.GetOptions{}); err != nil {
				continue
			}
			pod.Spec.NodeName = node
			if pod, err = h.client.CoreV1().Pods(pod.Namespace).Update(h.ctx, pod, metav1.UpdateOptions{}); err != nil {
				continue
			}
		}
		now := metav1.Now()
		ready := v1.ConditionTrue
		if pod.Annotations[annotationNeverReady] == "true" {
			ready = v1.ConditionFalse
		}
		pod.Status.Phase = v1.PodRunning
		pod.Status.ContainerStatuses = containerStatuses(pod, now)
		pod.Status.Conditions = []v1.PodCondition{
			{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: now},
			{Type: v1.PodReady, Status: ready, LastTransitionTime: now},
		}
		_, _ = h.client.CoreV1().Pods(pod.Namespace).UpdateStatus(h.ctx, pod, metav1.UpdateOptions{})
	}
}

// containerStatuses reports every container of a pod started at now, running the
// image its spec names, or restarted once more when that image changed since.
func containerStatuses(pod *v1.Pod, now metav1.Time) []v1.ContainerStatus {
	var out []v1.ContainerStatus
	for _, c := range pod.Spec.Containers {
		cs := v1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}}}
		for _, prev := range pod.Status.ContainerStatuses {
			if prev.Name == c.Name {
				cs.RestartCount = prev.RestartCount
				if prev.Image == c.Image {
					cs.State = prev.State
				} else {
					cs.RestartCount++
				}
			}
		}
		out = append(out, cs)
	}
	return out
}

// restartChangedContainers plays the kubelet's answer to a running pod's image
// change, updated in place: the container restarts with the new image, at once.
func (h *harness) restartChangedContainers(pod *v1.Pod) {
	next := containerStatuses(pod, metav1.Now())
	if equality.Semantic.DeepEqual(next, pod.Status.ContainerStatuses) {
		return
	}
	pod.Status.ContainerStatuses = next
	_, _ = h.client.CoreV1().Pods(pod.Namespace).UpdateStatus(h.ctx, pod, metav1.UpdateOptions{})
}

// waitFor steps the simulation every pollInterval until cond holds, and fails the test
// with a dump of the cluster if it does not within waitTimeout.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	h.waitForWithin(waitTimeout, what, cond)
}

func (h *harness) waitForWithin(timeout time.Duration, what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		h.step()
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out after %v waiting for %s\n%s", timeout, what, h.dump())
		}
		time.Sleep(pollInterval)
	}
}

// holdsFor steps the simulation for d and fails the test as soon as cond does not hold.
func (h *harness) holdsFor(d time.Duration, what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		h.step()
		if !cond() {
			h.t.Fatalf("%s stopped holding\n%s", what, h.dump())
		}
		time.Sleep(pollInterval)
	}
}

// prependReactor puts fn first in the fake API's chain for verb and resource. It
// holds the fake's lock meanwhile: the controller may be calling the API, and the
// fake reads its chain under that lock.
func (h *harness) prependReactor(verb, resource string, fn clienttesting.ReactionFunc) {
	h.client.Lock()
	defer h.client.Unlock()
	h.client.PrependReactor(verb, resource, fn)
}

// countStatusWrites counts the DaemonSet status writes from now on.
func (h *harness) countStatusWrites() *atomic.Int32 {
	var writes atomic.Int32
	h.prependReactor("update", "daemonsets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" {
			writes.Add(1)
		}
		return false, nil, nil
	})
	return &writes
}

// makeUnready reports each pod of ds not Ready, one after another, spacing apart,
// and returns how many it changed.
func (h *harness) makeUnready(ds *apps.DaemonSet, spacing time.Duration) int {
	flipped := 0
	for _, pods := range h.podsByNode(ds) {
		pod := pods[0]
		pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse, LastTransitionTime: metav1.Now()}}
		if _, err := h.client.CoreV1().Pods(pod.Namespace).UpdateStatus(h.ctx, &pod, metav1.UpdateOptions{}); err != nil {
			h.t.Fatal(err)
		}
		flipped++
		time.Sleep(spacing)
	}
	return flipped
}
