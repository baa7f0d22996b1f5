package daemon

import (
	"slices"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Builders for the objects the tests feed to the core. Each takes options that
// change one thing, so a test row states only what matters to its rule.

const testNS = "default"

// t0 is the fixed "now" of the tests.
var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

type dsOpt func(*apps.DaemonSet)

// newDS returns a RollingUpdate DaemonSet (maxUnavailable 1) selecting app=<name>.
func newDS(name string, opts ...dsOpt) *apps.DaemonSet {
	one := intstr.FromInt32(1)
	ds := &apps.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: testNS, UID: types.UID("uid-" + name), Generation: 1,
		},
		Spec: apps.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "img:v1"}}},
			},
			UpdateStrategy: apps.DaemonSetUpdateStrategy{
				Type:          apps.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &apps.RollingUpdateDaemonSet{MaxUnavailable: &one},
			},
		},
	}
	for _, o := range opts {
		o(ds)
	}
	return ds
}

func withImage(img string) dsOpt {
	return func(ds *apps.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = img }
}

func withNodeSelector(kv ...string) dsOpt {
	return func(ds *apps.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = kvMap(kv) }
}

func withTolerations(t ...v1.Toleration) dsOpt {
	return func(ds *apps.DaemonSet) { ds.Spec.Template.Spec.Tolerations = t }
}

func withOnDelete() dsOpt {
	return func(ds *apps.DaemonSet) {
		ds.Spec.UpdateStrategy = apps.DaemonSetUpdateStrategy{Type: apps.OnDeleteDaemonSetStrategyType}
	}
}

// withBudget sets maxSurge and maxUnavailable; "" leaves one unset.
func withBudget(surge, unavailable string) dsOpt {
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
		ds.Spec.UpdateStrategy = apps.DaemonSetUpdateStrategy{Type: apps.RollingUpdateDaemonSetStrategyType, RollingUpdate: r}
	}
}

func withMinReady(s int32) dsOpt { return func(ds *apps.DaemonSet) { ds.Spec.MinReadySeconds = s } }

// withAnnotations sets annotations on the DaemonSet, such as the rollout policy's.
func withAnnotations(kv ...string) dsOpt {
	return func(ds *apps.DaemonSet) {
		if ds.Annotations == nil {
			ds.Annotations = map[string]string{}
		}
		for k, v := range kvMap(kv) {
			ds.Annotations[k] = v
		}
	}
}

// withProgressing stores a Progressing condition with that reason and status, last
// changed at since.
func withProgressing(reason Reason, status v1.ConditionStatus, since time.Time) dsOpt {
	return func(ds *apps.DaemonSet) {
		ds.Status.Conditions = append(ds.Status.Conditions, apps.DaemonSetCondition{Type: ConditionProgressing,
			Status: status, Reason: string(reason), Message: "stored", LastTransitionTime: metav1.NewTime(since)})
	}
}

type nodeOpt func(*v1.Node)

func newNode(name string, opts ...nodeOpt) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func withLabels(kv ...string) nodeOpt {
	return func(n *v1.Node) {
		for k, v := range kvMap(kv) {
			n.Labels[k] = v
		}
	}
}

func withTaint(key string, effect v1.TaintEffect) nodeOpt {
	return func(n *v1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: key, Value: "x", Effect: effect})
	}
}

func nodes(names ...string) []*v1.Node {
	out := make([]*v1.Node, len(names))
	for i, name := range names {
		out[i] = newNode(name)
	}
	return out
}

type podOpt func(*v1.Pod)

// newPod returns a running, Ready (since long ago) pod of ds bound to node and
// labelled with ds's current template hash.
func newPod(ds *apps.DaemonSet, name, node string, opts ...podOpt) *v1.Pod {
	labels := map[string]string{HashLabel: hashOf(ds)}
	for k, v := range ds.Spec.Template.Labels {
		labels[k] = v
	}
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: testNS, UID: types.UID("uid-" + name), Labels: labels,
			CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour)),
			OwnerReferences:   []metav1.OwnerReference{*ControllerRef(ds)},
		},
		Spec:   v1.PodSpec{NodeName: node},
		Status: v1.PodStatus{Phase: v1.PodRunning},
	}
	readySince(t0.Add(-time.Hour))(p)
	for _, o := range opts {
		o(p)
	}
	return p
}

func readySince(at time.Time) podOpt {
	return func(p *v1.Pod) {
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}}
	}
}

func notReady() podOpt {
	return func(p *v1.Pod) {
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}
	}
}

// withRestarts gives the pod an init container and a container that restarted init
// and main times.
func withRestarts(init, main int32) podOpt {
	return func(p *v1.Pod) {
		p.Status.InitContainerStatuses = []v1.ContainerStatus{{Name: "init", RestartCount: init}}
		p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", RestartCount: main}}
	}
}

// waitingIn makes the pod's container c (or its init container, when init) wait
// with reason.
func waitingIn(reason string, init bool) podOpt {
	return func(p *v1.Pod) {
		cs := v1.ContainerStatus{Name: "c", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason, Message: "kubelet says " + reason}}}
		if init {
			cs.Name = "init"
			p.Status.InitContainerStatuses = []v1.ContainerStatus{cs}
			return
		}
		p.Status.ContainerStatuses = []v1.ContainerStatus{cs}
	}
}

// lastTerminated makes the last run of the pod's container c end with reason.
func lastTerminated(reason string) podOpt {
	return func(p *v1.Pod) {
		p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", RestartCount: 1,
			State:                v1.ContainerState{Running: &v1.ContainerStateRunning{}},
			LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: reason, ExitCode: 137}}}}
	}
}

func withPhase(ph v1.PodPhase) podOpt { return func(p *v1.Pod) { p.Status.Phase = ph } }

func withHash(h string) podOpt { return func(p *v1.Pod) { p.Labels[HashLabel] = h } }

// old marks the pod as created from an earlier template.
func old() podOpt { return withHash("old") }

func createdAt(t time.Time) podOpt {
	return func(p *v1.Pod) { p.CreationTimestamp = metav1.NewTime(t) }
}

func terminating() podOpt {
	return func(p *v1.Pod) { ts := metav1.NewTime(t0.Add(-time.Second)); p.DeletionTimestamp = &ts }
}

// unbound leaves the pod unscheduled, pinned to node by required affinity as the
// controller creates it.
func unbound() podOpt {
	return func(p *v1.Pod) {
		node := p.Spec.NodeName
		p.Spec.NodeName = ""
		p.Spec.Affinity = pinTo(node)
	}
}

func orphan() podOpt { return func(p *v1.Pod) { p.OwnerReferences = nil } }

func pinTo(node string) *v1.Affinity {
	return &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{
			Key: metav1.ObjectNameField, Operator: v1.NodeSelectorOpIn, Values: []string{node},
		}}}},
	}}}
}

// hashOf is the hash Decide gives ds's current template when no revision records it.
func hashOf(ds *apps.DaemonSet) string {
	return TemplateHash(&ds.Spec.Template, ds.Status.CollisionCount)
}

func snap(ds *apps.DaemonSet, ns []*v1.Node, pods ...*v1.Pod) *Snapshot {
	return &Snapshot{DaemonSet: ds, Nodes: ns, Pods: pods, Now: t0}
}

func kvMap(kv []string) map[string]string {
	m := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// createdOn lists the nodes of a plan's creates, in plan order.
func createdOn(p Plan) []string {
	var out []string
	for _, c := range p.Creates {
		out = append(out, c.Node)
	}
	return out
}

// deletedNames lists the names of a plan's deleted pods, in plan order.
func deletedNames(p Plan) []string {
	var out []string
	for _, d := range p.Deletes {
		out = append(out, d.Pod.Name)
	}
	return out
}

// updatedNames lists the names of the pods a plan updates in place, in plan order.
func updatedNames(p Plan) []string {
	var out []string
	for _, u := range p.Updates {
		out = append(out, u.Pod.Name)
	}
	return out
}

func eventReasons(p Plan) []string {
	var out []string
	for _, e := range p.Events {
		out = append(out, e.Reason)
	}
	return out
}

func sameStrings(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
