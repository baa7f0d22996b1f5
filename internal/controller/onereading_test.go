package controller

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/everynode/everynode/internal/daemon"
	"github.com/everynode/everynode/internal/dashboard"
	"github.com/everynode/everynode/internal/inspect"
	"github.com/everynode/everynode/internal/rolloutplan"
)

// Every tool that reports on a DaemonSet — the controller's own decision, `everynode
// explain`, `rollout status`, the dashboard and `rollout plan` — reads the same
// cluster objects through the one gatherer and runs the same core, each from where
// it reads them (the controller's slim caches, the API, the dashboard's informers).
// On one cluster they must report the same per-node verdicts, the same reasons
// and the same counts. The cluster holds what tends to set readers apart: a surge
// pod blocked by a host port declared only on an init container, a node that keeps
// its pod under a NoSchedule taint, a node outside the nodeSelector, and waves.
func TestEveryToolReadsTheClusterAlike(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	ds, objs := oneReadingCluster(t, now)
	client := fake.NewClientset(objs...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The controller: its caches and its snapshot, as a sync reads them.
	factory := informers.NewSharedInformerFactory(client, 0)
	ctrl, err := New(ctx, client, factory, Options{Clock: testingclock.NewFakeClock(now)})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), ctrl.synced...) // the caches, and the handlers' first pass
	key := ds.Namespace + "/" + ds.Name
	var fromController daemon.Report
	deadline := time.Now().Add(waitTimeout)
	for {
		s, err := ctrl.snapshot(ds, key, nil, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Pods) == 5 {
			fromController = daemon.Explain(s)
			if p := daemon.Decide(s); p.Status == nil || int(p.Status.DesiredNumberScheduled) != inspect.Count(fromController).Nodes {
				t.Fatalf("the controller's status %+v counts other nodes than its report (%+v)", p.Status, inspect.Count(fromController))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the controller's pod index holds %d of the 5 pods", len(s.Pods))
		}
		time.Sleep(pollInterval)
	}

	// explain, from the API.
	explained, err := inspect.Explain(ctx, client, ds.Namespace, ds.Name, now)
	if err != nil {
		t.Fatal(err)
	}
	// The dashboard, from its own informers.
	cache := dashboard.NewCache(client, "")
	if err := cache.Start(ctx); err != nil {
		t.Fatal(err)
	}
	shown, _, err := cache.Explain(ds.Namespace, ds.Name, now)
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]daemon.Report{"explain": explained.Report, "dashboard": shown.Report} {
		if err := sameReport(fromController, r); err != nil {
			t.Errorf("%s and the controller disagree: %v", name, err)
		}
	}

	// What the cluster is, so that agreeing is not agreeing on nothing.
	want := map[string]string{"n1": string(daemon.ReasonSurgeHostPort), "n3": string(daemon.ReasonUntoleratedTaint),
		"n4": string(daemon.ReasonNodeSelectorMismatch), "n5": string(daemon.ReasonLaterWave)}
	for _, n := range fromController.Nodes {
		got := string(n.Waiting)
		if !n.Verdict.Run {
			got = string(n.Verdict.Reason)
		}
		if got != want[n.Node] {
			t.Errorf("node %s: %q, want %q", n.Node, got, want[n.Node])
		}
	}
	if c := inspect.Count(fromController); c.Nodes != 3 || c.Updated != 2 || c.Available != 1 {
		t.Errorf("counts %+v, want 3 nodes, 2 updated, 1 available", c)
	}

	// rollout status: its waves are counted from the same report.
	progress, err := inspect.Look(ctx, client, ds, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := inspect.Waves(fromController); !reflect.DeepEqual(progress.Waves, want) {
		t.Errorf("rollout status counts waves %+v, the controller's report %+v", progress.Waves, want)
	}
	// rollout plan: the same nodes to run the pod, and the host port seen.
	in := rolloutplan.Input{DaemonSet: ds, Nodes: objectsOf[*v1.Node](objs), Pods: objectsOf[*v1.Pod](objs), Revisions: objectsOf[*apps.ControllerRevision](objs)}
	sched, err := rolloutplan.Plan(in, rolloutplan.Options{Start: now, PodStart: rolloutplan.DefaultPodStart})
	if err != nil {
		t.Fatal(err)
	}
	if sched.Desired != inspect.Count(fromController).Nodes || sched.WaveKey != explained.WaveKey {
		t.Errorf("rollout plan: %d desired nodes, waves by %q; the others %d, %q", sched.Desired, sched.WaveKey, inspect.Count(fromController).Nodes, explained.WaveKey)
	}
	if !strings.Contains(strings.Join(sched.Notes, " "), "host ports") {
		t.Errorf("rollout plan does not see the init container's host port: notes %q", sched.Notes)
	}
}

// sameReport compares what two reports say: the revision, the condition, the
// problems and, node by node, the verdict, what it waits for, its pods and what is
// next.
func sameReport(a, b daemon.Report) error {
	if a.Hash != b.Hash || a.Revision != b.Revision || a.Settled != b.Settled || !reflect.DeepEqual(a.Problems, b.Problems) ||
		!reflect.DeepEqual(a.Progressing, b.Progressing) || !reflect.DeepEqual(a.Events, b.Events) {
		return fmt.Errorf("reports differ: %+v against %+v", a, b)
	}
	if inspect.Count(a) != inspect.Count(b) {
		return fmt.Errorf("counts %+v against %+v", inspect.Count(a), inspect.Count(b))
	}
	if len(a.Nodes) != len(b.Nodes) {
		return fmt.Errorf("%d nodes against %d", len(a.Nodes), len(b.Nodes))
	}
	for i := range a.Nodes {
		x, y := a.Nodes[i], b.Nodes[i]
		if x.Node != y.Node || x.Verdict.Run != y.Verdict.Run || x.Verdict.KeepRunning != y.Verdict.KeepRunning ||
			x.Verdict.Reason != y.Verdict.Reason || x.Verdict.Message() != y.Verdict.Message() ||
			x.Waiting != y.Waiting || !x.Until.Equal(y.Until) || x.WaitMessage() != y.WaitMessage() || x.Wave != y.Wave ||
			!reflect.DeepEqual(x.Pods, y.Pods) || !reflect.DeepEqual(x.Next, y.Next) {
			return fmt.Errorf("node %s: %+v against %+v", x.Node, x, y)
		}
	}
	return nil
}

// oneReadingCluster is a DaemonSet rolling out by surge and by zone: n1 (zone a)
// has an old pod and a surge pod the scheduler cannot place for the host port the
// old pod's init container holds, n2 (zone a) runs the new revision, n3 keeps its
// old pod under a taint the pod does not tolerate, n4 is outside the nodeSelector,
// n5 (zone b) waits for its wave.
func oneReadingCluster(t *testing.T, now time.Time) (*apps.DaemonSet, []runtime.Object) {
	t.Helper()
	surge, zero := intstr.FromInt32(1), intstr.FromInt32(0)
	template := func(image string) v1.PodTemplateSpec {
		return v1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
			Spec: v1.PodSpec{
				NodeSelector:   map[string]string{"pool": "agents"},
				InitContainers: []v1.Container{{Name: "setup", Image: "setup:1", Ports: []v1.ContainerPort{{ContainerPort: 9100, HostPort: 9100}}}},
				Containers:     []v1.Container{{Name: "agent", Image: image}},
			},
		}
	}
	ds := &apps.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: testNamespace, UID: "agent-uid", Generation: 2,
			Annotations: map[string]string{daemon.AnnotationWaves: "zone"}},
		Spec: apps.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: template("agent:2"),
			UpdateStrategy: apps.DaemonSetUpdateStrategy{Type: apps.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &apps.RollingUpdateDaemonSet{MaxSurge: &surge, MaxUnavailable: &zero}},
		},
	}
	revision := func(tmpl v1.PodTemplateSpec, number int64) (*apps.ControllerRevision, string) {
		patch, err := daemon.TemplatePatch(&tmpl)
		if err != nil {
			t.Fatal(err)
		}
		hash := daemon.TemplateHash(&tmpl, nil)
		return &apps.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "agent-" + hash, Namespace: testNamespace,
			Labels: map[string]string{"app": "agent", daemon.HashLabel: hash}, OwnerReferences: []metav1.OwnerReference{*daemon.ControllerRef(ds)}},
			Data: runtime.RawExtension{Raw: patch}, Revision: number}, hash
	}
	oldRev, oldHash := revision(template("agent:1"), 1)
	curRev, curHash := revision(ds.Spec.Template, 2)
	node := func(name, zone string, pool bool, taint bool) *v1.Node {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"zone": zone}}}
		if pool {
			n.Labels["pool"] = "agents"
		}
		if taint {
			n.Spec.Taints = []v1.Taint{{Key: "maintenance", Effect: v1.TaintEffectNoSchedule}}
		}
		return n
	}
	ready := v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}
	pod := func(name, node, hash string, image string, running bool) *v1.Pod {
		p := daemon.PodForNode(ds, &v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent", daemon.HashLabel: hash}},
			Spec: template(image).Spec}, node)
		p.Name, p.UID, p.CreationTimestamp = name, types.UID("uid-"+name), metav1.NewTime(now.Add(-2*time.Hour))
		if running {
			p.Spec.NodeName = node
			p.Status = v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{ready}}
		}
		return p
	}
	surgePod := pod("agent-n1-new", "n1", curHash, "agent:2", false)
	surgePod.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute))
	surgePod.Status = v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse,
		Reason: v1.PodReasonUnschedulable, Message: "0/5 nodes are available: 1 node(s) didn't have free ports for the requested pod ports."}}}
	return ds, []runtime.Object{ds, oldRev, curRev,
		node("n1", "a", true, false), node("n2", "a", true, false), node("n3", "b", true, true),
		node("n4", "b", false, false), node("n5", "b", true, false),
		pod("agent-n1-old", "n1", oldHash, "agent:1", true), surgePod,
		pod("agent-n2", "n2", curHash, "agent:2", true),
		pod("agent-n3", "n3", oldHash, "agent:1", true),
		pod("agent-n5", "n5", oldHash, "agent:1", true),
	}
}

// objectsOf are the objects of type T among objs.
func objectsOf[T runtime.Object](objs []runtime.Object) []T {
	var out []T
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}
