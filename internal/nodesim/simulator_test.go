package nodesim

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func testConfig(nodes int) Config {
	c := DefaultConfig()
	c.Nodes = nodes
	return c
}

func TestRunRejectsInvalidConfig(t *testing.T) {
	cfg := testConfig(-1)
	if err := New(nil, cfg).Run(t.Context()); err == nil {
		t.Fatal("Run() with -1 nodes succeeded")
	}
}

func TestNodesRegisteredWithStatus(t *testing.T) {
	h := startSimulator(t, testConfig(3))
	for i := range 3 {
		name := fmt.Sprintf("sim-node-%d", i)
		h.eventually(name+" registered", func() bool { return h.node(name) != nil })
		node := h.node(name)
		if !isSimulated(node) || node.Labels[labelHostname] != name || node.Labels[labelOS] != "linux" || node.Labels[labelArch] != "amd64" {
			t.Errorf("%s labels = %v", name, node.Labels)
		}
		if node.Spec.PodCIDR != fmt.Sprintf("10.128.%d.0/24", i) {
			t.Errorf("%s pod range = %q", name, node.Spec.PodCIDR)
		}
		checkDefaultNodeStatus(t, node.Status, fmt.Sprintf("10.0.0.%d", i+1))
	}
	if nodes, _ := h.client.CoreV1().Nodes().List(h.ctx, metav1.ListOptions{}); len(nodes.Items) != 3 {
		t.Errorf("%d nodes, want 3", len(nodes.Items))
	}
}

func TestExistingNodesAreNotRegisteredAgain(t *testing.T) {
	existing := newNode("sim-node-0", 0, t0.Add(-time.Hour))
	existing.Annotations = map[string]string{"kept": "yes"}
	unlabelled := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "sim-node-1"}}
	h := startSimulator(t, testConfig(2), existing, unlabelled)
	h.eventually("leases", func() bool {
		l, err := h.client.CoordinationV1().Leases(LeaseNamespace).List(h.ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 1
	})
	if n := h.node("sim-node-0"); n.Annotations["kept"] != "yes" {
		t.Errorf("existing node replaced: %+v", n.ObjectMeta)
	}
	if n := h.node("sim-node-1"); isSimulated(n) || len(n.Status.Conditions) != 0 {
		t.Errorf("a node someone else owns was taken over: %+v", n)
	}
}

func TestUserNodeAdopted(t *testing.T) {
	h := startSimulator(t, testConfig(1))
	h.eventually("sim-node-0", func() bool { return h.node("sim-node-0") != nil })
	user := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "edge-1", UID: "uid-edge-1", Labels: map[string]string{LabelSimulated: "true"}}}
	if _, err := h.client.CoreV1().Nodes().Create(h.ctx, user, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("edge-1 adopted", func() bool {
		n := h.node("edge-1")
		return n != nil && len(n.Status.Conditions) > 0 && n.Spec.PodCIDR != ""
	})
	n := h.node("edge-1")
	if n.Spec.PodCIDR != "10.128.1.0/24" {
		t.Errorf("pod range = %q, want the first one past the registered nodes", n.Spec.PodCIDR)
	}
	checkDefaultNodeStatus(t, n.Status, "10.0.0.2")
	h.eventually("edge-1 lease", func() bool {
		_, err := h.client.CoordinationV1().Leases(LeaseNamespace).Get(h.ctx, "edge-1", metav1.GetOptions{})
		return err == nil
	})

	// A pod on the adopted node runs there.
	h.createPod(boundPod("on-edge", "edge-1", nil))
	h.advanceUntil("pod on edge-1 Ready", 100*time.Millisecond, func() bool { return readyIs(h.pod("on-edge"), true) })
	if ip := h.pod("on-edge").Status.PodIP; ip != "10.128.1.2" {
		t.Errorf("pod IP = %s, want one from edge-1's range", ip)
	}
}

func TestLeaseCreatedAndRenewed(t *testing.T) {
	cfg := testConfig(1)
	cfg.LeaseInterval = 10 * time.Second
	h := startSimulator(t, cfg)
	getLease := func() *coordinationv1.Lease {
		l, err := h.client.CoordinationV1().Leases(LeaseNamespace).Get(h.ctx, "sim-node-0", metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return l
	}
	h.eventually("lease", func() bool { return getLease() != nil })
	lease := getLease()
	node := h.node("sim-node-0")
	if *lease.Spec.HolderIdentity != "sim-node-0" || *lease.Spec.LeaseDurationSeconds != 40 || !lease.Spec.RenewTime.Time.Equal(t0) {
		t.Errorf("lease spec = %+v", lease.Spec)
	}
	if refs := lease.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Node" || refs[0].Name != "sim-node-0" || refs[0].UID != node.UID {
		t.Errorf("owner references = %+v", refs)
	}
	renewals := []time.Time{lease.Spec.RenewTime.Time}
	for len(renewals) < 3 {
		h.advanceUntil("lease renewal", time.Second, func() bool {
			return getLease().Spec.RenewTime.Time.After(renewals[len(renewals)-1])
		})
		renewals = append(renewals, getLease().Spec.RenewTime.Time)
	}
	if gap := renewals[2].Sub(renewals[1]); gap < 9*time.Second || gap > 11*time.Second {
		t.Errorf("steady renewal gap %v, want about the 10s interval", gap)
	}
	if gap := renewals[1].Sub(renewals[0]); gap < 5*time.Second || gap > 16*time.Second {
		t.Errorf("first renewal gap %v, want between half and one and a half intervals", gap)
	}
}

func TestNodeReadyKnobIntegration(t *testing.T) {
	h := startSimulator(t, testConfig(1))
	h.eventually("sim-node-0", func() bool { return h.node("sim-node-0") != nil })
	h.createPod(boundPod("web", "sim-node-0", nil))
	h.advanceUntil("pod Ready", 100*time.Millisecond, func() bool { return readyIs(h.pod("web"), true) })

	nodeReady := func() v1.ConditionStatus {
		return nodeCondition(h.node("sim-node-0").Status, v1.NodeReady).Status
	}
	setKnob := func(value *string) {
		node := h.node("sim-node-0")
		if value == nil {
			delete(node.Annotations, AnnotationReady)
		} else {
			metav1.SetMetaDataAnnotation(&node.ObjectMeta, AnnotationReady, *value)
		}
		if _, err := h.client.CoreV1().Nodes().Update(h.ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setKnob(ptr.To("false"))
	h.eventually("node not Ready", func() bool { return nodeReady() == v1.ConditionFalse })
	if c := nodeCondition(h.node("sim-node-0").Status, v1.NodeReady); c.Reason != reasonKubeletNotReady {
		t.Errorf("Ready = %+v, want reason KubeletNotReady", c)
	}
	h.eventually("pod on a not-ready node not Ready", func() bool { return readyIs(h.pod("web"), false) })

	writes := countNodeStatusWrites(h)
	setKnob(ptr.To("false")) // the same value again: nothing to write
	h.holds("no extra node status write", 100*time.Millisecond, 5, func() bool { return countNodeStatusWrites(h) == writes })

	setKnob(nil)
	h.eventually("node Ready again", func() bool { return nodeReady() == v1.ConditionTrue })
	h.eventually("pod Ready again", func() bool { return readyIs(h.pod("web"), true) })
}

func countNodeStatusWrites(h *harness) int {
	n := 0
	for _, a := range h.client.Actions() {
		if a.Matches("update", "nodes") && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

func TestPodRunningAndReadyAfterDelay(t *testing.T) {
	h := startSimulator(t, testConfig(1))
	h.eventually("sim-node-0", func() bool { return h.node("sim-node-0") != nil })
	h.createPod(boundPod("web", "sim-node-0", nil))
	h.eventually("pod Pending with a start time", func() bool {
		p := h.pod("web")
		return phaseIs(p, v1.PodPending) && p.Status.StartTime != nil
	})
	took := h.advanceUntil("pod Ready", 100*time.Millisecond, func() bool { return readyIs(h.pod("web"), true) })
	if took < time.Second {
		t.Errorf("Ready after %v, want at least the 1s ready delay", took)
	}
	p := h.pod("web")
	if p.Status.Phase != v1.PodRunning || p.Status.HostIP != "10.0.0.1" || p.Status.PodIP != "10.128.0.2" {
		t.Errorf("status = %+v", p.Status)
	}
	ready := podCondition(p, v1.PodReady)
	if since := ready.LastTransitionTime.Sub(p.Status.StartTime.Time); since < time.Second {
		t.Errorf("Ready %v after the start, want at least 1s", since)
	}
	for _, ct := range []v1.PodConditionType{v1.PodScheduled, v1.PodInitialized, v1.ContainersReady, v1.PodReady} {
		if c := podCondition(p, ct); c == nil || c.Status != v1.ConditionTrue {
			t.Errorf("%s = %+v", ct, c)
		}
	}
	writes := countPodStatusWrites(h, "web")
	h.holds("no status writes while nothing changes", time.Second, 5, func() bool { return countPodStatusWrites(h, "web") == writes })
	cs := p.Status.ContainerStatuses
	if len(cs) != 1 || cs[0].State.Running == nil || !cs[0].Ready || !*cs[0].Started || cs[0].ContainerID == "" || cs[0].ImageID == "" {
		t.Errorf("container statuses = %+v", cs)
	}

	// More pods get their own IPs; a hostNetwork pod gets the node's.
	h.createPod(boundPod("second", "sim-node-0", nil))
	host := boundPod("host", "sim-node-0", nil)
	host.Spec.HostNetwork = true
	h.createPod(host)
	h.advanceUntil("more pods Ready", 100*time.Millisecond, func() bool {
		return readyIs(h.pod("second"), true) && readyIs(h.pod("host"), true)
	})
	if ip := h.pod("second").Status.PodIP; ip == "" || ip == "10.128.0.2" {
		t.Errorf("second pod IP = %q, want a fresh one", ip)
	}
	if ip := h.pod("host").Status.PodIP; ip != "10.0.0.1" {
		t.Errorf("hostNetwork pod IP = %q, want the node IP", ip)
	}
}

func countPodStatusWrites(h *harness, name string) int {
	n := 0
	for _, a := range h.client.Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && a.GetSubresource() == "status" {
			if p, ok := u.GetObject().(*v1.Pod); ok && p.Name == name {
				n++
			}
		}
	}
	return n
}

func TestRestartKeepsStoredAddresses(t *testing.T) {
	node := newNode("sim-node-0", 0, t0.Add(-time.Hour))
	running := boundPod("old", "sim-node-0", nil)
	running.Status = v1.PodStatus{Phase: v1.PodRunning, StartTime: &metav1.Time{Time: t0.Add(-time.Hour)},
		PodIP: "10.128.0.2", PodIPs: []v1.PodIP{{IP: "10.128.0.2"}}}
	h := startSimulator(t, testConfig(1), node, running)
	h.createPod(boundPod("new", "sim-node-0", nil))
	h.advanceUntil("both pods Ready", 100*time.Millisecond, func() bool {
		return readyIs(h.pod("old"), true) && readyIs(h.pod("new"), true)
	})
	if ip := h.pod("old").Status.PodIP; ip != "10.128.0.2" {
		t.Errorf("stored pod IP changed to %s", ip)
	}
	if ip := h.pod("new").Status.PodIP; ip == "10.128.0.2" || ip == "" {
		t.Errorf("new pod IP = %q, want a free one", ip)
	}
}

func TestPodsOnOtherNodesAreIgnored(t *testing.T) {
	real := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "real-node"}}
	h := startSimulator(t, testConfig(1), real)
	h.createPod(boundPod("elsewhere", "real-node", nil))
	h.createPod(boundPod("unbound", "", nil))
	h.eventually("sim-node-0", func() bool { return h.node("sim-node-0") != nil })
	h.holds("foreign pods untouched", 500*time.Millisecond, 6, func() bool {
		return h.pod("elsewhere").Status.Phase == "" && h.pod("unbound").Status.Phase == ""
	})
}

func TestReadyAfterAnnotation(t *testing.T) {
	h := startSimulator(t, testConfig(1))
	h.eventually("sim-node-0", func() bool { return h.node("sim-node-0") != nil })
	h.createPod(boundPod("slow", "sim-node-0", map[string]string{AnnotationReadyAfter: "5s"}))
	h.eventually("pod Pending", func() bool { return phaseIs(h.pod("slow"), v1.PodPending) })
	took := h.advanceUntil("pod Ready", 250*time.Millisecond, func() bool { return readyIs(h.pod("slow"), true) })
	if took < 5*time.Second {
		t.Errorf("Ready after %v, want at least 5s", took)
	}
	p := h.pod("slow")
	if since := podCondition(p, v1.PodReady).LastTransitionTime.Sub(p.Status.StartTime.Time); since < 5*time.Second {
		t.Errorf("Ready %v after the start, want at least 5s", since)
	}
}

func TestPhaseAnnotation(t *testing.T) {
	for _, tt := range []struct {
		phase    v1.PodPhase
		exitCode int32
	}{{v1.PodFailed, 1}, {v1.PodSucceeded, 0}} {
		t.Run(string(tt.phase), func(t *testing.T) {
			h := startSimulator(t, testConfig(1))
			h.eventually("sim-node-0", func() bool { return h.node("sim-node-0") != nil })
			h.createPod(boundPod("job", "sim-node-0", map[string]string{AnnotationPhase: string(tt.phase), AnnotationReadyAfter: "2s"}))
			h.eventually("pod Pending", func() bool { return phaseIs(h.pod("job"), v1.PodPending) })
			took := h.advanceUntil("pod "+string(tt.phase), 250*time.Millisecond, func() bool { return phaseIs(h.pod("job"), tt.phase) })
			if took < 2*time.Second {
				t.Errorf("%s after %v, want at least 2s", tt.phase, took)
			}
			cs := h.pod("job").Status.ContainerStatuses[0]
			if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != tt.exitCode {
				t.Errorf("container state = %+v, want terminated with exit code %d", cs.State, tt.exitCode)
			}
			h.holds("pod stays "+string(tt.phase), time.Second, 5, func() bool { return phaseIs(h.pod("job"), tt.phase) })
		})
	}
}

func TestReadyFalseAnnotation(t *testing.T) {
	h := startSimulator(t, testConfig(1))
	h.eventually("sim-node-0", func() bool { return h.node("sim-node-0") != nil })
	h.createPod(boundPod("stuck", "sim-node-0", map[string]string{AnnotationReady: "false"}))
	h.advanceUntil("pod Running", 100*time.Millisecond, func() bool { return phaseIs(h.pod("stuck"), v1.PodRunning) })
	h.holds("pod never Ready", time.Second, 10, func() bool {
		p := h.pod("stuck")
		return phaseIs(p, v1.PodRunning) && readyIs(p, false)
	})
}

func TestRestartEveryAnnotation(t *testing.T) {
	h := startSimulator(t, testConfig(1))
	h.eventually("sim-node-0", func() bool { return h.node("sim-node-0") != nil })
	h.createPod(boundPod("crashy", "sim-node-0", map[string]string{AnnotationRestartEvery: "10s"}))
	h.advanceUntil("pod Ready", 100*time.Millisecond, func() bool { return readyIs(h.pod("crashy"), true) })
	restarts := func() int32 { return h.pod("crashy").Status.ContainerStatuses[0].RestartCount }
	for want := int32(1); want <= 2; want++ {
		h.advanceUntil(fmt.Sprintf("crash %d", want), 250*time.Millisecond, func() bool {
			p := h.pod("crashy")
			cs := p.Status.ContainerStatuses[0]
			if want == 1 {
				// Restarted at once: the crashed run shows until then.
				return readyIs(p, false) && cs.State.Terminated != nil
			}
			return readyIs(p, false) && cs.RestartCount == want && cs.State.Waiting != nil
		})
		h.advanceUntil(fmt.Sprintf("recovery %d", want), 250*time.Millisecond, func() bool {
			return readyIs(h.pod("crashy"), true)
		})
		if got := restarts(); got != want {
			t.Fatalf("restartCount after recovery = %d, want %d", got, want)
		}
	}
	p := h.pod("crashy")
	if p.Status.Phase != v1.PodRunning || p.Status.ContainerStatuses[0].LastTerminationState.Terminated == nil {
		t.Errorf("status = %+v", p.Status)
	}
}

func TestFailedPodNeverRevived(t *testing.T) {
	failed := boundPod("failed", "sim-node-0", nil)
	failed.Status.Phase = v1.PodFailed
	h := startSimulator(t, testConfig(1), failed)
	h.eventually("sim-node-0", func() bool { return h.node("sim-node-0") != nil })

	h.createPod(boundPod("web", "sim-node-0", nil))
	h.advanceUntil("pod Ready", 100*time.Millisecond, func() bool { return readyIs(h.pod("web"), true) })
	web := h.pod("web")
	web.Status.Phase = v1.PodFailed
	if _, err := h.client.CoreV1().Pods("default").UpdateStatus(h.ctx, web, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.holds("failed pods stay Failed", time.Second, 10, func() bool {
		return phaseIs(h.pod("failed"), v1.PodFailed) && phaseIs(h.pod("web"), v1.PodFailed)
	})
	for _, a := range h.client.Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && a.GetSubresource() == "status" {
			if p, ok := u.GetObject().(*v1.Pod); ok && p.Name == "failed" {
				t.Errorf("status of a Failed pod written: %+v", p.Status)
			}
		}
	}
}

func TestDeletingPodRemovedAfterStopDelay(t *testing.T) {
	cfg := testConfig(1)
	cfg.PodStopDelay = 2 * time.Second
	h := startSimulator(t, cfg)
	h.eventually("sim-node-0", func() bool { return h.node("sim-node-0") != nil })
	h.createPod(boundPod("web", "sim-node-0", nil))
	h.advanceUntil("pod Ready", 100*time.Millisecond, func() bool { return readyIs(h.pod("web"), true) })

	// What the API server does on a graceful delete: mark the pod, keep it.
	p := h.pod("web")
	requested := h.clock.Now()
	p.DeletionTimestamp = &metav1.Time{Time: requested.Add(30 * time.Second)}
	p.DeletionGracePeriodSeconds = ptr.To[int64](30)
	h.updatePod(p)
	h.advanceUntil("pod removed", 100*time.Millisecond, func() bool {
		_, err := h.client.CoreV1().Pods("default").Get(h.ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if took := h.clock.Since(requested); took < 2*time.Second || took > 10*time.Second {
		t.Errorf("removed %v after the delete, want after the 2s stop delay and well before the 30s grace period", took)
	}
	var deletes int
	for _, a := range h.client.Actions() {
		if d, ok := a.(clienttesting.DeleteActionImpl); ok && a.GetResource().Resource == "pods" {
			deletes++
			opts := d.GetDeleteOptions()
			if opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds != 0 || opts.Preconditions == nil || *opts.Preconditions.UID != p.UID {
				t.Errorf("delete options = %+v", opts)
			}
		}
	}
	if deletes != 1 {
		t.Errorf("%d deletes, want 1", deletes)
	}
}

func TestStatusConflictIsRetried(t *testing.T) {
	h := startSimulator(t, testConfig(1))
	var conflicts atomic.Int32
	// The simulator is running: the fake reads its reactors under its lock.
	h.client.Lock()
	h.client.PrependReactor("update", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" && conflicts.Load() < 3 {
			conflicts.Add(1)
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "web", fmt.Errorf("stale"))
		}
		return false, nil, nil
	})
	h.client.Unlock()
	h.eventually("sim-node-0", func() bool { return h.node("sim-node-0") != nil })
	h.createPod(boundPod("web", "sim-node-0", nil))
	h.advanceUntil("pod Ready despite conflicts", 100*time.Millisecond, func() bool { return readyIs(h.pod("web"), true) })
	if conflicts.Load() != 3 {
		t.Errorf("%d conflicts injected, want 3", conflicts.Load())
	}
}
