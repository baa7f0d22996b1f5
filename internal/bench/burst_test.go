package bench

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/everynode/everynode/internal/controller"
	"github.com/everynode/everynode/internal/daemon"
	"github.com/everynode/everynode/internal/nodesim"
)

func TestLatenciesCountNodesThatNeverGotThere(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var l latencies
	for i := 1; i <= 98; i++ {
		l.add(t0, t0.Add(time.Duration(i)*time.Second), true)
	}
	l.add(t0, time.Time{}, false)
	l.add(t0, time.Time{}, false)
	if got := l.seconds(50); got != 50 {
		t.Errorf("p50 = %v, want 50", got)
	}
	if got := l.seconds(98); got != 98 {
		t.Errorf("p98 = %v, want 98", got)
	}
	if got := l.seconds(99); !math.IsInf(got, 1) {
		t.Errorf("p99 with 2 of 100 nodes missing = %v, want +Inf", got)
	}
	var none latencies
	if got := none.seconds(50); !math.IsNaN(got) {
		t.Errorf("p50 of no nodes = %v, want NaN", got)
	}
	var missing latencies
	missing.add(t0, time.Time{}, false)
	if got := missing.seconds(50); !math.IsInf(got, 1) {
		t.Errorf("p50 of one missing node = %v, want +Inf", got)
	}
}

// storedDaemonSet is ds as the API server stores it, as far as the pods care: a
// UID and the template generation annotation.
func storedDaemonSet(ds *apps.DaemonSet) *apps.DaemonSet {
	ds = ds.DeepCopy()
	ds.UID = types.UID("uid-" + ds.Name)
	ds.Annotations = map[string]string{daemon.TemplateGenerationAnnotation: "1"}
	return ds
}

func TestSettledPodIsTheControllersPodBound(t *testing.T) {
	ds := storedDaemonSet(burstDaemonSets()[0])
	template := settledTemplate(ds)
	got := settledPod(ds, template, "sim-node-7")

	hash := daemon.TemplateHash(&ds.Spec.Template, nil)
	want := daemon.PodForNode(ds, daemon.PodTemplate(ds, hash), "sim-node-7")
	want.Spec.NodeName = "sim-node-7"
	metav1.SetMetaDataAnnotation(&want.ObjectMeta, nodesim.AnnotationReadyAfter, "0s")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("settled pod differs from the controller's pod, bound (-want +got):\n%s", diff)
	}
	if got.Labels[daemon.HashLabel] != hash || got.Labels[daemon.TemplateGenerationLabel] != "1" || got.Labels["app"] != ds.Name {
		t.Errorf("labels %v: want the revision hash %s, template generation 1 and app=%s", got.Labels, hash, ds.Name)
	}
	ref := metav1.GetControllerOf(got)
	if ref == nil || ref.Kind != "DaemonSet" || ref.Name != ds.Name || ref.UID != ds.UID {
		t.Errorf("controller ref %+v, want DaemonSet %s (%s)", ref, ds.Name, ds.UID)
	}
	if got.Spec.NodeName != "sim-node-7" || targetNode(got) != "sim-node-7" {
		t.Errorf("bound to %q, target %q; want sim-node-7", got.Spec.NodeName, targetNode(got))
	}
	if got.Spec.PriorityClassName != controller.SystemNodeCritical {
		t.Errorf("CNI pod's priority class %q", got.Spec.PriorityClassName)
	}
	if _, ok := template.Annotations[nodesim.AnnotationReadyAfter]; ok {
		t.Errorf("template annotated %v: only the settled pods may be, or the revision's hash changes", template.Annotations)
	}
}

func TestBurstDaemonSets(t *testing.T) {
	all := burstDaemonSets()
	if len(all) != 20 || all[0].Name != burstCNI {
		t.Fatalf("%d DaemonSets, first %s; want 20, the CNI agent first", len(all), all[0].Name)
	}
	notReady := &v1.Node{Spec: v1.NodeSpec{Taints: burstNode("n").Spec.Taints}}
	var tolerant int
	names := map[string]bool{}
	for _, ds := range all {
		names[ds.Name] = true
		if shouldRun(ds, notReady) {
			tolerant++
		}
		if ds.Name != burstCNI && ds.Spec.Template.Spec.PriorityClassName != "" {
			t.Errorf("%s has priority class %q", ds.Name, ds.Spec.Template.Spec.PriorityClassName)
		}
	}
	if len(names) != 20 {
		t.Errorf("names not unique: %v", names)
	}
	if tolerant != 10 {
		t.Errorf("%d DaemonSets run on a not-ready node, want 10 (the CNI agent and nine)", tolerant)
	}
	sel, err := labels.Parse(burstCNISelector)
	if err != nil || !sel.Matches(labels.Set(all[0].Spec.Template.Labels)) || sel.Matches(labels.Set(all[1].Spec.Template.Labels)) {
		t.Errorf("the readiness selector %q must match the CNI agent's pods only (err %v)", burstCNISelector, err)
	}
}

func TestBurstNodeWaitsForItsCNIAgent(t *testing.T) {
	node := burstNode("bench-burst-3")
	if node.Annotations[nodesim.AnnotationReadyRequires] != burstCNISelector || node.Labels[nodesim.LabelSimulated] != "true" {
		t.Errorf("node %+v: want simulated, ready-requires %q", node.ObjectMeta, burstCNISelector)
	}
	if len(node.Spec.Taints) != 2 || node.Spec.Taints[0].Key != v1.TaintNodeNotReady || len(daemon.GateTaints(node, burstGateKey)) != 1 {
		t.Errorf("taints %v, want the not-ready taint a kubelet registers with and the storage agent's gate", node.Spec.Taints)
	}
}

// Exactly one burst DaemonSet gates new nodes, on the key the burst nodes carry,
// and it tolerates its own gate.
func TestBurstGatingDaemonSet(t *testing.T) {
	var gating []string
	for _, ds := range burstDaemonSets() {
		if g := daemon.ParseNodeGate(ds); g.Key != "" || g.Problem != "" {
			if g.Key != burstGateKey || g.Problem != "" {
				t.Errorf("%s gates on %q (problem %q), want %s", ds.Name, g.Key, g.Problem, burstGateKey)
			}
			gating = append(gating, ds.Name)
		}
	}
	if len(gating) != 1 || gating[0] != burstGating {
		t.Errorf("gating DaemonSets %v, want [%s]", gating, burstGating)
	}
}

func TestPodMilestones(t *testing.T) {
	ds := storedDaemonSet(daemonSet("a"))
	other := storedDaemonSet(daemonSet("b"))
	m := newPodMilestones()
	t0 := time.Unix(1000, 0)
	pending := settledPod(ds, settledTemplate(ds), "n1")
	pending.Spec.NodeName = "" // not yet scheduled: the node comes from its affinity
	m.see(pending, t0)
	running := pending.DeepCopy()
	running.Spec.NodeName = "n1"
	running.Status.Phase = v1.PodRunning
	m.see(running, t0.Add(2*time.Second))
	m.see(running, t0.Add(5*time.Second)) // a later update changes nothing
	m.see(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orphan"}, Spec: v1.PodSpec{NodeName: "n1"}, Status: v1.PodStatus{Phase: v1.PodRunning}}, t0)

	if got, ok := m.createdAt("n1", "a"); !ok || !got.Equal(t0) {
		t.Errorf("createdAt = %v, %v; want %v", got, ok, t0)
	}
	if got, ok := m.allRunningAt("n1", []string{"a"}); !ok || !got.Equal(t0.Add(2*time.Second)) {
		t.Errorf("allRunningAt(a) = %v, %v; want t0+2s", got, ok)
	}
	if _, ok := m.allRunningAt("n1", []string{"a", "b"}); ok {
		t.Error("allRunningAt(a, b) before b's pod ran: ok")
	}
	b := settledPod(other, settledTemplate(other), "n1")
	b.Status.Phase = v1.PodRunning
	m.see(b, t0.Add(9*time.Second))
	if got, ok := m.allRunningAt("n1", []string{"a", "b"}); !ok || !got.Equal(t0.Add(9*time.Second)) {
		t.Errorf("allRunningAt(a, b) = %v, %v; want t0+9s, the later", got, ok)
	}
	if got := m.runningCount(); got != 2 {
		t.Errorf("runningCount = %d, want 2 (the orphan is no DaemonSet's)", got)
	}
}

func TestBurstIsNotRunByDefault(t *testing.T) {
	if slices.Contains(DefaultOptions().Scenarios, "burst") {
		t.Error("burst is in the default scenarios")
	}
	o := DefaultOptions()
	o.Scenarios = []string{"burst"}
	if err := o.Validate(); err != nil {
		t.Errorf("--scenarios burst: %v", err)
	}
}
