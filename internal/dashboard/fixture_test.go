package dashboard

import (
	"context"
	"fmt"
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

// fixture is a cluster of n nodes in three zones, running DaemonSet ns/agent
// (RollingUpdate, maxUnavailable 1) with an available pod of its template on each.
type fixture struct {
	client *fake.Clientset
	ds     *apps.DaemonSet
	nodes  []string
}

var created = metav1.NewTime(time.Now().Add(-time.Hour))

func newFixture(tb testing.TB, n int) *fixture {
	tb.Helper()
	one := intstr.FromInt32(1)
	ds := &apps.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "agent", UID: types.UID("ds-uid"), Generation: 1,
			CreationTimestamp: created},
		Spec: apps.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "agent", Image: "agent:1"}}},
			},
			UpdateStrategy: apps.DaemonSetUpdateStrategy{Type: apps.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &apps.RollingUpdateDaemonSet{MaxUnavailable: &one}},
		},
		Status: apps.DaemonSetStatus{DesiredNumberScheduled: int32(n), CurrentNumberScheduled: int32(n),
			NumberReady: int32(n), UpdatedNumberScheduled: int32(n), NumberAvailable: int32(n), ObservedGeneration: 1},
	}
	f := &fixture{ds: ds}
	objs := []runtime.Object{ds}
	template := daemon.PodTemplate(ds, daemon.TemplateHash(&ds.Spec.Template, nil))
	for i := range n {
		name := fmt.Sprintf("node-%04d", i)
		f.nodes = append(f.nodes, name)
		objs = append(objs, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{ZoneLabel: fmt.Sprintf("zone-%d", i%3)}}})
		objs = append(objs, f.pod(template, name))
	}
	f.client = fake.NewClientset(objs...)
	return f
}

// pod is the agent's available pod on node, from template.
func (f *fixture) pod(template *v1.PodTemplateSpec, node string) *v1.Pod {
	pod := daemon.PodForNode(f.ds, template, node)
	pod.Name = "agent-" + node
	pod.UID = types.UID("uid-" + node)
	pod.CreationTimestamp = created
	pod.Spec.NodeName = node
	pod.Status = v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{
		{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: created}}}
	return pod
}

// roll replaces the pods of the first k nodes with pods of a new template, as a
// rollout does, in the API (the DaemonSet's template changed too).
func (f *fixture) roll(tb testing.TB, image string, k int) {
	tb.Helper()
	ctx := context.Background()
	ds, err := f.client.AppsV1().DaemonSets("ns").Get(ctx, "agent", metav1.GetOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	if ds.Spec.Template.Spec.Containers[0].Image != image {
		ds.Spec.Template.Spec.Containers[0].Image = image
		ds.Generation++
		if ds, err = f.client.AppsV1().DaemonSets("ns").Update(ctx, ds, metav1.UpdateOptions{}); err != nil {
			tb.Fatal(err)
		}
		f.ds = ds
	}
	template := daemon.PodTemplate(ds, daemon.TemplateHash(&ds.Spec.Template, nil))
	for _, node := range f.nodes[:k] {
		pod := f.pod(template, node)
		if _, err := f.client.CoreV1().Pods("ns").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
			tb.Fatal(err)
		}
	}
}

// cache is a started Cache of the fixture's cluster.
func (f *fixture) cache(tb testing.TB) *Cache {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	c := NewCache(f.client, "")
	if err := c.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	return c
}
