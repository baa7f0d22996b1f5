package rolloutplan

import (
	"fmt"
	"slices"
	"strings"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/everynode/everynode/internal/daemon"
)

// The clusters the tests plan on: DaemonSet "agent" whose template moved from image
// v1 (revision 1, hash "v1", run by a Ready pod on every node it names) to v2.

var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

type dsOpt func(*apps.DaemonSet)

func newDS(opts ...dsOpt) *apps.DaemonSet {
	one := intstr.FromInt32(1)
	ds := &apps.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "default", UID: "uid-agent", Generation: 2},
		Spec: apps.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "agent", Image: "agent:v2"}}},
			},
			UpdateStrategy: apps.DaemonSetUpdateStrategy{Type: apps.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &apps.RollingUpdateDaemonSet{MaxUnavailable: &one}},
		},
	}
	for _, o := range opts {
		o(ds)
	}
	return ds
}

// budget sets maxSurge and maxUnavailable ("" leaves one unset).
func budget(surge, unavailable string) dsOpt {
	return func(ds *apps.DaemonSet) {
		r := &apps.RollingUpdateDaemonSet{}
		if surge != "" {
			v := intstr.Parse(surge)
			r.MaxSurge = &v
		}
		if unavailable != "" {
			v := intstr.Parse(unavailable)
			r.MaxUnavailable = &v
		}
		ds.Spec.UpdateStrategy.RollingUpdate = r
	}
}

func onDelete() dsOpt {
	return func(ds *apps.DaemonSet) {
		ds.Spec.UpdateStrategy = apps.DaemonSetUpdateStrategy{Type: apps.OnDeleteDaemonSetStrategyType}
	}
}

func minReady(s int32) dsOpt { return func(ds *apps.DaemonSet) { ds.Spec.MinReadySeconds = s } }

// annotate sets rollout annotations: "paused", "true" sets rollout.everynode.dev/paused.
func annotate(kv ...string) dsOpt {
	return func(ds *apps.DaemonSet) {
		if ds.Annotations == nil {
			ds.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			ds.Annotations[daemon.RolloutPrefix+kv[i]] = kv[i+1]
		}
	}
}

// node is "name" or "name key=value ...".
func node(spec string) *v1.Node {
	f := strings.Fields(spec)
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: f[0], Labels: map[string]string{}}}
	for _, kv := range f[1:] {
		k, v, _ := strings.Cut(kv, "=")
		n.Labels[k] = v
	}
	return n
}

// oldRevision is revision 1 of ds: its template with image v1.
func oldRevision(ds *apps.DaemonSet) *apps.ControllerRevision {
	old := ds.Spec.Template.DeepCopy()
	old.Spec.Containers[0].Image = "agent:v1"
	patch, err := daemon.TemplatePatch(old)
	if err != nil {
		panic(err)
	}
	return &apps.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-v1", Namespace: ds.Namespace, UID: "uid-rev-1",
			Labels:          map[string]string{"app": "agent", daemon.HashLabel: "v1"},
			OwnerReferences: []metav1.OwnerReference{*daemon.ControllerRef(ds)}},
		Data:     runtime.RawExtension{Raw: patch},
		Revision: 1,
	}
}

// readyPod is a pod of ds's revision hash on node, Ready for an hour.
func readyPod(ds *apps.DaemonSet, hash, node string) *v1.Pod {
	since := metav1.NewTime(t0.Add(-time.Hour))
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("agent-%s-%s", hash, node), Namespace: ds.Namespace,
			UID:               types.UID("uid-" + hash + "-" + node),
			Labels:            map[string]string{"app": "agent", daemon.HashLabel: hash},
			OwnerReferences:   []metav1.OwnerReference{*daemon.ControllerRef(ds)},
			CreationTimestamp: since},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "agent", Image: "agent:" + hash}}},
		Status: v1.PodStatus{Phase: v1.PodRunning,
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: since}}},
	}
}

// input is a cluster of ds on nodes, each running an old pod except those listed
// in bare.
func input(ds *apps.DaemonSet, nodes []string, bare ...string) Input {
	in := Input{DaemonSet: ds, Revisions: []*apps.ControllerRevision{oldRevision(ds)}}
	for _, spec := range nodes {
		n := node(spec)
		in.Nodes = append(in.Nodes, n)
		if !slices.Contains(bare, n.Name) {
			in.Pods = append(in.Pods, readyPod(ds, "v1", n.Name))
		}
	}
	return in
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%02d", prefix, i+1)
	}
	return out
}
