package inspect

import (
	"context"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/everynode/everynode/internal/daemon"
)

// A hand-built cluster for the tests: DaemonSets, their revisions, nodes and pods, as
// the controller would have left them.

const ns = "prod"

// t0 is the tests' "now".
var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

func newDS(name string, annotations map[string]string) *apps.DaemonSet {
	one := intstr.FromInt32(1)
	return &apps.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Generation: 1,
			Annotations: annotations},
		Spec: apps.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "img:v1"}},
					NodeSelector: map[string]string{"role": "worker"}},
			},
			UpdateStrategy: apps.DaemonSetUpdateStrategy{
				Type:          apps.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &apps.RollingUpdateDaemonSet{MaxUnavailable: &one},
			},
		},
		Status: apps.DaemonSetStatus{ObservedGeneration: 1},
	}
}

// revision records ds's current template as revision number n and returns it with
// the template's hash.
func revision(t *testing.T, ds *apps.DaemonSet, n int64) (*apps.ControllerRevision, string) {
	t.Helper()
	data, err := daemon.TemplatePatch(&ds.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	hash := daemon.TemplateHash(&ds.Spec.Template, nil)
	return &apps.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: ds.Name + "-" + hash, Namespace: ns,
			Labels:          map[string]string{"app": ds.Name, daemon.HashLabel: hash},
			OwnerReferences: []metav1.OwnerReference{*daemon.ControllerRef(ds)}},
		Data:     runtime.RawExtension{Raw: data},
		Revision: n,
	}, hash
}

func newNode(name string, labels ...string) *v1.Node {
	l := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		l[labels[i]] = labels[i+1]
	}
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}}}
}

// newPod is ds's pod of revision hash on node, running, and ready when ready is set.
func newPod(ds *apps.DaemonSet, name, hash, node string, ready bool) *v1.Pod {
	pod := daemon.PodForNode(ds, daemon.PodTemplate(ds, hash), node)
	pod.Name, pod.GenerateName, pod.UID = name, "", types.UID("uid-"+name)
	pod.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour))
	pod.Labels[daemon.HashLabel] = hash
	status := v1.ConditionFalse
	if ready {
		status = v1.ConditionTrue
	}
	pod.Status = v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: status,
		LastTransitionTime: metav1.NewTime(t0.Add(-30 * time.Minute))}}}
	return pod
}

func progressing(status v1.ConditionStatus, reason daemon.Reason, msg string) apps.DaemonSetCondition {
	return apps.DaemonSetCondition{Type: daemon.ConditionProgressing, Status: status, Reason: string(reason), Message: msg,
		LastTransitionTime: metav1.NewTime(t0.Add(-10 * time.Minute))}
}

// wavesCluster: DaemonSet agent rolls out img:v2 (revision 2) by zone, wave-order b
// first. node-b1 (zone b) runs v2 and is ready; node-b2 (zone b) runs v2, not ready
// yet; node-a1 (zone a) still runs v1; node-x (no role) is not selected.
func wavesCluster(t *testing.T) (*fake.Clientset, *apps.DaemonSet) {
	t.Helper()
	ds := newDS("agent", map[string]string{daemon.AnnotationWaves: "zone", daemon.AnnotationWaveOrder: "b"})
	rev1, h1 := revision(t, ds, 1)
	ds.Spec.Template.Spec.Containers[0].Image = "img:v2"
	ds.Generation, ds.Status.ObservedGeneration = 2, 2
	rev2, h2 := revision(t, ds, 2)
	ds.Status.DesiredNumberScheduled, ds.Status.UpdatedNumberScheduled, ds.Status.NumberAvailable = 3, 2, 2
	ds.Status.Conditions = []apps.DaemonSetCondition{progressing(v1.ConditionTrue, daemon.ReasonRollingOut, "rolling out revision 2")}
	client := fake.NewClientset(ds, rev1, rev2,
		newNode("node-a1", "role", "worker", "zone", "a"),
		newNode("node-b1", "role", "worker", "zone", "b"),
		newNode("node-b2", "role", "worker", "zone", "b"),
		newNode("node-x", "zone", "a"),
		newPod(ds, "agent-a1", h1, "node-a1", true),
		newPod(ds, "agent-b1", h2, "node-b1", true),
		newPod(ds, "agent-b2", h2, "node-b2", false),
	)
	return client, ds
}

func getDS(t *testing.T, client *fake.Clientset, name string) *apps.DaemonSet {
	t.Helper()
	ds, err := client.AppsV1().DaemonSets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}
