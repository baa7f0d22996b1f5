package bench

import (
	"fmt"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/everynode/everynode/internal/controller"
	"github.com/everynode/everynode/internal/daemon"
	"github.com/everynode/everynode/internal/nodesim"
)

// The burst scenario's DaemonSets: one CNI agent, burstTolerant more that tolerate
// every taint (the first of them the storage agent, which gates new nodes: gate.go),
// and burstPlain that tolerate only the benchmark's maintenance taint.
const (
	burstCNI      = "cni"
	burstTolerant = 9
	burstPlain    = 10
)

// burstCNISelector is the label selector of the CNI agent's pods: what a node's
// readiness waits for (nodesim.AnnotationReadyRequires).
var burstCNISelector = "app=" + burstCNI

// burstDaemonSets are the burst scenario's DaemonSets, the CNI agent first: it has
// priority class system-node-critical and, like the tolerant ones, tolerates every
// taint, so its pods may go to nodes that are not ready yet.
func burstDaemonSets() []*apps.DaemonSet {
	everything := []v1.Toleration{{Operator: v1.TolerationOpExists}}
	cni := daemonSet(burstCNI)
	cni.Spec.Template.Spec.PriorityClassName = controller.SystemNodeCritical
	cni.Spec.Template.Spec.Tolerations = everything
	out := []*apps.DaemonSet{cni}
	for i := range burstTolerant {
		ds := daemonSet(fmt.Sprintf("tolerant-%d", i))
		if i == 0 {
			// The storage agent: new nodes wait for it (the node gate), and it
			// tolerates every taint, the gate's too.
			ds = daemonSet(burstGating)
			ds.Annotations = map[string]string{daemon.AnnotationNodeGate: burstGateKey}
		}
		ds.Spec.Template.Spec.Tolerations = everything
		out = append(out, ds)
	}
	for i := range burstPlain {
		out = append(out, daemonSet(fmt.Sprintf("plain-%d", i)))
	}
	return out
}

// settledTemplate is the template a DaemonSet controller makes ds's pods from: ds
// must be the stored DaemonSet (with the API server's defaults and its template
// generation annotation), so that the revision hash is the one the controller
// computes.
func settledTemplate(ds *apps.DaemonSet) *v1.PodTemplateSpec {
	return daemon.PodTemplate(ds, daemon.TemplateHash(&ds.Spec.Template, nil))
}

// settledPod is ds's pod for node as a controller would have created it from
// template, already bound to node: a controller that starts finds it current.
//
// It is Running and Ready on the simulator's first status write (the pod alone is
// annotated, not the template: its hash, and so its revision, stay the controller's),
// so the settle costs one write per pod, not two a delay apart: at 5,000 nodes its
// 100,000 pods are most of the API server's work before the controller starts. The
// burst's own pods keep the simulator's delay.
func settledPod(ds *apps.DaemonSet, template *v1.PodTemplateSpec, node string) *v1.Pod {
	pod := daemon.PodForNode(ds, template, node)
	pod.Spec.NodeName = node
	metav1.SetMetaDataAnnotation(&pod.ObjectMeta, nodesim.AnnotationReadyAfter, "0s")
	return pod
}

// burstNode is a node added in the burst: simulated, its readiness waiting for the
// CNI agent, registered with the not-ready taint, as a kubelet registers a node, and
// with the storage agent's gate taint, as a provisioner's startup taint.
func burstNode(name string) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{nodesim.LabelSimulated: "true", v1.LabelHostname: name},
			Annotations: map[string]string{nodesim.AnnotationReadyRequires: burstCNISelector},
		},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoSchedule},
			{Key: burstGateKey, Value: "true", Effect: v1.TaintEffectNoSchedule}}},
	}
}
