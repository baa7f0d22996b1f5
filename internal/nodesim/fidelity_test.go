package nodesim

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// These tests hold the simulator to what a real kubelet (v1.37, containerd) was seen
// to report by the end-to-end test TestRealNodeFidelity.

func TestDecidePod_ConditionsInTheKubeletsOrder(t *testing.T) {
	in := fixtureInput(Behaviour{ReadyAfter: time.Second})
	// The scheduler wrote PodScheduled first, as it does.
	in.Pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}}
	live(in, 0, 2*time.Second)
	var got []v1.PodConditionType
	for _, c := range in.Pod.Status.Conditions {
		got = append(got, c.Type)
	}
	want := []v1.PodConditionType{v1.PodReadyToStartContainers, v1.PodInitialized, v1.PodReady, v1.ContainersReady, v1.PodScheduled}
	if len(got) != len(want) {
		t.Fatalf("conditions %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("conditions %v, want %v", got, want)
		}
	}
}

func TestDecidePod_ResourcesReportedOnceTheContainerExists(t *testing.T) {
	requests := v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m"), v1.ResourceMemory: resource.MustParse("32Mi")}
	limits := v1.ResourceList{v1.ResourceMemory: resource.MustParse("32Mi")}
	for _, tc := range []struct {
		name      string
		behaviour Behaviour
		at        []time.Duration
		want      bool
	}{
		{"creating", Behaviour{ReadyAfter: 5 * time.Second}, []time.Duration{0}, false},
		{"running", Behaviour{ReadyAfter: time.Second}, []time.Duration{0, 2 * time.Second}, true},
		{"crashed, waiting to restart", Behaviour{ReadyAfter: time.Second, RestartEvery: 4 * time.Second}, []time.Duration{0, 2 * time.Second, 5 * time.Second, 9*time.Second + 500*time.Millisecond}, true},
		{"its image cannot be pulled", Behaviour{ReadyAfter: time.Second, Failures: []Failure{{Reason: FailErrImagePull}}}, []time.Duration{0, 2 * time.Second}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := fixtureInput(tc.behaviour)
			in.Pod.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: requests, Limits: limits}
			live(in, tc.at...)
			cs := in.Pod.Status.ContainerStatuses[0]
			if got := cs.Resources != nil && cs.AllocatedResources != nil; got != tc.want {
				t.Fatalf("state %+v: resources %v, allocated %v; want reported: %v", cs.State, cs.Resources, cs.AllocatedResources, tc.want)
			}
			if tc.want && (!cs.AllocatedResources.Cpu().Equal(requests[v1.ResourceCPU]) || !cs.Resources.Limits.Memory().Equal(limits[v1.ResourceMemory])) {
				t.Fatalf("allocated %v, resources %v; want the requests allocated and the limits reported", cs.AllocatedResources, cs.Resources)
			}
		})
	}
}
