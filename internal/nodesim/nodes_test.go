package nodesim

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func nodeCondition(st v1.NodeStatus, t v1.NodeConditionType) *v1.NodeCondition {
	if i := findNodeCondition(st.Conditions, t); i >= 0 {
		return &st.Conditions[i]
	}
	return nil
}

func TestNewNode(t *testing.T) {
	node := newNode("sim-node-2", 2, t0)
	for k, want := range map[string]string{LabelSimulated: "true", labelHostname: "sim-node-2", labelOS: "linux", labelArch: "amd64"} {
		if got := node.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	if node.Spec.PodCIDR != "10.128.2.0/24" || len(node.Spec.PodCIDRs) != 1 {
		t.Errorf("pod range = %q %v", node.Spec.PodCIDR, node.Spec.PodCIDRs)
	}
	checkDefaultNodeStatus(t, node.Status, "10.0.0.3")
}

func checkDefaultNodeStatus(t *testing.T, st v1.NodeStatus, ip string) {
	t.Helper()
	for _, list := range []v1.ResourceList{st.Capacity, st.Allocatable} {
		for name, want := range map[v1.ResourceName]string{v1.ResourceCPU: "8", v1.ResourceMemory: "32Gi", v1.ResourcePods: "110"} {
			if q, ok := list[name]; !ok || q.Cmp(resource.MustParse(want)) != 0 {
				t.Errorf("%s = %v, want %s", name, list[name], want)
			}
		}
	}
	if c := nodeCondition(st, v1.NodeReady); c == nil || c.Status != v1.ConditionTrue || c.Reason != reasonKubeletReady {
		t.Errorf("Ready = %+v", c)
	}
	for _, ct := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		if c := nodeCondition(st, ct); c == nil || c.Status != v1.ConditionFalse {
			t.Errorf("%s = %+v, want False", ct, c)
		}
	}
	if got := internalIP(&v1.Node{Status: st}); got != ip {
		t.Errorf("InternalIP = %q, want %q", got, ip)
	}
	if st.NodeInfo.KubeletVersion != KubeletVersion || st.NodeInfo.OperatingSystem != "linux" || st.NodeInfo.Architecture != "amd64" {
		t.Errorf("nodeInfo = %+v", st.NodeInfo)
	}
	if st.DaemonEndpoints.KubeletEndpoint.Port != KubeletPort {
		t.Errorf("kubelet port = %d", st.DaemonEndpoints.KubeletEndpoint.Port)
	}
}

func TestDesiredNodeStatus(t *testing.T) {
	later := t0.Add(time.Minute)
	tests := []struct {
		name   string
		node   *v1.Node
		ready  bool
		verify func(t *testing.T, before *v1.Node, st v1.NodeStatus)
	}{
		{
			name: "a node without status gets the defaults",
			node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "edge"}}, ready: true,
			verify: func(t *testing.T, _ *v1.Node, st v1.NodeStatus) { checkDefaultNodeStatus(t, st, "10.0.0.8") },
		},
		{
			name: "what the user set is kept",
			node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "big"}, Status: v1.NodeStatus{
				Capacity:  v1.ResourceList{v1.ResourceCPU: resource.MustParse("64")},
				Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.168.1.1"}},
				NodeInfo:  v1.NodeSystemInfo{Architecture: "arm64"},
			}},
			ready: true,
			verify: func(t *testing.T, _ *v1.Node, st v1.NodeStatus) {
				if q := st.Capacity[v1.ResourceCPU]; q.String() != "64" || len(st.Capacity) != 1 {
					t.Errorf("capacity = %v", st.Capacity)
				}
				if q := st.Allocatable[v1.ResourceCPU]; q.String() != "64" {
					t.Errorf("allocatable follows capacity: %v", st.Allocatable)
				}
				if internalIP(&v1.Node{Status: st}) != "192.168.1.1" || st.NodeInfo.Architecture != "arm64" || st.NodeInfo.KubeletVersion != KubeletVersion {
					t.Errorf("status = %+v", st)
				}
			},
		},
		{
			name: "ready knob off: Ready False, KubeletNotReady",
			node: newNode("sim-node-0", 0, t0), ready: false,
			verify: func(t *testing.T, _ *v1.Node, st v1.NodeStatus) {
				c := nodeCondition(st, v1.NodeReady)
				if c.Status != v1.ConditionFalse || c.Reason != reasonKubeletNotReady || !c.LastTransitionTime.Time.Equal(later) {
					t.Errorf("Ready = %+v", c)
				}
			},
		},
		{
			name: "nothing changed: status equal, times kept",
			node: newNode("sim-node-0", 0, t0), ready: true,
			verify: func(t *testing.T, before *v1.Node, st v1.NodeStatus) {
				if c := nodeCondition(st, v1.NodeReady); !c.LastTransitionTime.Time.Equal(t0) {
					t.Errorf("Ready transition time moved: %+v", c)
				}
				if len(st.Conditions) != len(before.Status.Conditions) {
					t.Errorf("conditions = %+v", st.Conditions)
				}
			},
		},
		{
			name: "Ready Unknown from the node lifecycle controller is made True again",
			node: func() *v1.Node {
				n := newNode("sim-node-0", 0, t0)
				n.Status.Conditions[findNodeCondition(n.Status.Conditions, v1.NodeReady)].Status = v1.ConditionUnknown
				return n
			}(),
			ready: true,
			verify: func(t *testing.T, _ *v1.Node, st v1.NodeStatus) {
				if c := nodeCondition(st, v1.NodeReady); c.Status != v1.ConditionTrue || !c.LastTransitionTime.Time.Equal(later) {
					t.Errorf("Ready = %+v", c)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.node.DeepCopy()
			notReady := ""
			if !tt.ready {
				notReady = messageKubeletNotReady
			}
			st := desiredNodeStatus(tt.node, 7, notReady, later)
			tt.verify(t, before, st)
		})
	}
}

func TestNodeReadyKnob(t *testing.T) {
	tests := []struct {
		annotations map[string]string
		ready, err  bool
	}{
		{nil, true, false},
		{map[string]string{AnnotationReady: "false"}, false, false},
		{map[string]string{AnnotationReady: "true"}, true, false},
		{map[string]string{AnnotationReady: "sometimes"}, true, true},
	}
	for _, tt := range tests {
		ready, err := nodeReadyKnob(&v1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: tt.annotations}})
		if ready != tt.ready || (err != nil) != tt.err {
			t.Errorf("nodeReadyKnob(%v) = %v, %v", tt.annotations, ready, err)
		}
	}
}
