package nodesim

import (
	"fmt"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Values a simulated node reports.
const (
	// runtimeScheme prefixes the simulated runtime's version and container IDs, as
	// "containerd://" does a containerd node's.
	runtimeScheme = "nodesim://"
	nodeCPU       = "8"
	nodeMemory    = "32Gi"
	nodePods      = "110"
	nodeOS        = "linux"
	nodeArch      = "amd64"
	nodeOSImage   = "everynode simulated node"
	nodeKernel    = "6.12.0-sim"
	// A simulated node names its runtime, as its OS image, for what it is: tools that
	// tell real nodes from simulated ones read it.
	nodeContainerRuntime   = runtimeScheme + "1"
	reasonKubeletReady     = "KubeletReady"
	reasonKubeletNotReady  = "KubeletNotReady"
	messageKubeletReady    = "kubelet is posting ready status"
	messageKubeletNotReady = "simulated: node annotation " + AnnotationReady + " is false"
	// messageNetworkNotReady is what a kubelet says while its CNI plugin is not up.
	messageNetworkNotReady  = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"
	labelHostname           = "kubernetes.io/hostname"
	labelOS                 = "kubernetes.io/os"
	labelArch               = "kubernetes.io/arch"
	simulatedLabelValue     = "true"
	messageSufficientMemory = "kubelet has sufficient memory available"
	messageNoDiskPressure   = "kubelet has no disk pressure"
	messageSufficientPID    = "kubelet has sufficient PID available"
)

// healthyCondition is a node condition a healthy node reports False.
type healthyCondition struct {
	t               v1.NodeConditionType
	reason, message string
}

// pressureConditions are the conditions a healthy node reports False.
func pressureConditions() []healthyCondition {
	return []healthyCondition{
		{v1.NodeMemoryPressure, "KubeletHasSufficientMemory", messageSufficientMemory},
		{v1.NodeDiskPressure, "KubeletHasNoDiskPressure", messageNoDiskPressure},
		{v1.NodePIDPressure, "KubeletHasSufficientPID", messageSufficientPID},
	}
}

// isSimulated reports whether the simulator plays kubelet for node.
func isSimulated(node *v1.Node) bool {
	return node != nil && node.Labels[LabelSimulated] == simulatedLabelValue
}

// nodeReadyKnob reads a node's ready annotation: absent or true means Ready. An
// invalid value is reported and means Ready.
func nodeReadyKnob(node *v1.Node) (bool, error) { return boolKnob(node, AnnotationReady, true) }

// boolKnob reads a node annotation that is true or false: unset, or invalid (which
// is reported), it is def.
func boolKnob(node *v1.Node, key string, def bool) (bool, error) {
	s, ok := node.Annotations[key]
	if !ok {
		return def, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return def, fmt.Errorf("%s=%q: want true or false", key, s)
	}
	return b, nil
}

// kubeletStopped reads a node's kubelet annotation: "stopped" means the kubelet
// is down; absent or "running" means it runs. An invalid value is reported and
// means it runs.
func kubeletStopped(node *v1.Node) (bool, error) {
	switch s, ok := node.Annotations[AnnotationKubelet]; {
	case !ok || s == "running":
		return false, nil
	case s == "stopped":
		return true, nil
	default:
		return false, fmt.Errorf("%s=%q: want stopped or running", AnnotationKubelet, s)
	}
}

// shuttingDown reads a node's shutdown annotation: "true" means a graceful
// shutdown is under way. An invalid value is reported and means none.
func shuttingDown(node *v1.Node) (bool, error) { return boolKnob(node, AnnotationShutdown, false) }

// newNode is the Node the simulator registers under the given name and index.
func newNode(name string, index int, now time.Time) *v1.Node {
	cidr := podCIDR(index).String()
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				LabelSimulated: simulatedLabelValue,
				labelHostname:  name,
				labelOS:        nodeOS,
				labelArch:      nodeArch,
			},
		},
		Spec: v1.NodeSpec{PodCIDR: cidr, PodCIDRs: []string{cidr}},
	}
	node.Status = desiredNodeStatus(node, index, "", now)
	return node
}

// desiredNodeStatus is the status a simulated node should have: what it has, with
// missing parts filled with the defaults and the Ready condition True, or False
// with the message notReady when that is not empty.
// Condition times change only when a condition's status does.
func desiredNodeStatus(node *v1.Node, index int, notReady string, now time.Time) v1.NodeStatus {
	st := *node.Status.DeepCopy()
	stamp := metav1.NewTime(now.Truncate(time.Second))
	if len(st.Capacity) == 0 {
		st.Capacity = v1.ResourceList{
			v1.ResourceCPU:    resource.MustParse(nodeCPU),
			v1.ResourceMemory: resource.MustParse(nodeMemory),
			v1.ResourcePods:   resource.MustParse(nodePods),
		}
	}
	if len(st.Allocatable) == 0 {
		st.Allocatable = st.Capacity.DeepCopy()
	}
	if len(st.Addresses) == 0 {
		st.Addresses = []v1.NodeAddress{
			{Type: v1.NodeInternalIP, Address: nodeIP(index).String()},
			{Type: v1.NodeHostName, Address: node.Name},
		}
	}
	info := &st.NodeInfo
	for _, f := range []struct {
		field *string
		value string
	}{
		{&info.KubeletVersion, KubeletVersion},
		{&info.OperatingSystem, nodeOS},
		{&info.Architecture, nodeArch},
		{&info.OSImage, nodeOSImage},
		{&info.KernelVersion, nodeKernel},
		{&info.ContainerRuntimeVersion, nodeContainerRuntime},
	} {
		if *f.field == "" {
			*f.field = f.value
		}
	}
	if st.DaemonEndpoints.KubeletEndpoint.Port == 0 {
		st.DaemonEndpoints.KubeletEndpoint.Port = KubeletPort
	}
	for _, p := range pressureConditions() {
		if findNodeCondition(st.Conditions, p.t) < 0 {
			st.Conditions = append(st.Conditions, v1.NodeCondition{
				Type: p.t, Status: v1.ConditionFalse, Reason: p.reason, Message: p.message,
				LastHeartbeatTime: stamp, LastTransitionTime: stamp,
			})
		}
	}
	want := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: reasonKubeletReady, Message: messageKubeletReady,
		LastHeartbeatTime: stamp, LastTransitionTime: stamp}
	if notReady != "" {
		want.Status, want.Reason, want.Message = v1.ConditionFalse, reasonKubeletNotReady, notReady
	}
	if i := findNodeCondition(st.Conditions, v1.NodeReady); i < 0 {
		st.Conditions = append(st.Conditions, want)
	} else if st.Conditions[i].Status != want.Status {
		st.Conditions[i] = want
	}
	return st
}

func findNodeCondition(conds []v1.NodeCondition, t v1.NodeConditionType) int {
	for i := range conds {
		if conds[i].Type == t {
			return i
		}
	}
	return -1
}

// internalIP returns the node's first InternalIP, or "".
func internalIP(node *v1.Node) string {
	for _, a := range node.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}
