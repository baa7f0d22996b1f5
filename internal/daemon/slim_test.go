package daemon

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fatten gives a random pod what real pods carry and Decide does not read (images,
// IPs, volumes, other annotations), and some of what it does (container states,
// host ports, a failure record, an unschedulable surge pod), or makes it another
// controller's.
func fatten(r *rand.Rand, pod *v1.Pod) {
	pod.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "2030-01-01T00:00:00Z"}
	if r.IntN(3) == 0 {
		pod.Annotations[AnnotationFailedBefore] = fmt.Sprint(r.IntN(5))
	}
	pod.Spec.Containers = []v1.Container{{Name: "c", Image: "registry.example/agent:1",
		Ports: []v1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 9100, HostPort: int32(9100 * r.IntN(2))}}}}
	pod.Spec.Volumes = []v1.Volume{{Name: "kube-api-access"}}
	pod.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
	pod.Status.PodIP, pod.Status.HostIP = "10.0.0.9", "192.168.0.9"
	pod.Status.Conditions = append(pod.Status.Conditions, v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue})
	if r.IntN(6) == 0 {
		pod.Status.Conditions = append(pod.Status.Conditions, v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionFalse,
			Reason: v1.PodReasonUnschedulable, Message: portsMsg})
	}
	started := metav1.NewTime(t0.Add(-time.Duration(r.IntN(30)) * time.Second))
	cs := v1.ContainerStatus{Name: "c", Image: "registry.example/agent:1", ImageID: "sha", ContainerID: "containerd://x",
		RestartCount: int32(r.IntN(3)), State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: started}}}
	switch r.IntN(5) {
	case 0:
		cs.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off"}}
	case 1:
		cs.LastTerminationState.Terminated = &v1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137, FinishedAt: started}
	}
	pod.Status.ContainerStatuses = []v1.ContainerStatus{cs}
	if r.IntN(8) == 0 {
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs-uid", Controller: new(true)}}
	}
}

// planShape is a Plan with pods named instead of pointed to, to compare Plans
// computed from different copies of the same pods.
func planShape(p Plan) Plan {
	names := func(pods []*v1.Pod) []*v1.Pod {
		var out []*v1.Pod
		for _, pod := range pods {
			out = append(out, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod.Name}})
		}
		return out
	}
	p.Adopt, p.Release, p.Relabel = names(p.Adopt), names(p.Release), names(p.Relabel)
	deletes := p.Deletes
	p.Deletes = nil
	for _, d := range deletes {
		p.Deletes = append(p.Deletes, PodDelete{Pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: d.Pod.Name}}, Reason: d.Reason})
	}
	return p
}

// Decide gives the same Plan, and Explain the same report, over slim pods as over
// whole ones, across random clusters and rollout policies.
func TestSlimPodsDecideAlike(t *testing.T) {
	for seed := uint64(1); seed <= propertyRuns/4; seed++ {
		r := rand.New(rand.NewPCG(seed, 0x5111))
		s := randomSnapshot(r, seed%2 == 0)
		ds := s.DaemonSet
		if ds.Annotations == nil {
			ds.Annotations = map[string]string{}
		}
		for _, kv := range [][2]string{
			{AnnotationMaxRestarts, "1"}, {AnnotationOnFailure, OnFailureRollback}, {AnnotationSurgeFallback, SurgeDeleteFirst},
			{AnnotationMinHealthy, "20s"}, {AnnotationPartition, "1"}, {AnnotationProgressDeadline, "1m"},
		} {
			if r.IntN(3) == 0 {
				ds.Annotations[kv[0]] = kv[1]
			}
		}
		for _, pod := range s.Pods {
			fatten(r, pod)
		}
		slim := deepCopySnapshot(s)
		for i, pod := range slim.Pods {
			slim.Pods[i] = SlimPod(pod)
		}
		want, got := planShape(Decide(s)), planShape(Decide(slim))
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("seed %d %v: the Plans differ:\nwhole: %+v\nslim:  %+v", seed, ds.Annotations, want, got)
		}
		if a, b := Explain(s), Explain(slim); !reflect.DeepEqual(a.Nodes, b.Nodes) {
			t.Fatalf("seed %d: Explain differs over slim pods:\nwhole: %+v\nslim:  %+v", seed, a.Nodes, b.Nodes)
		}
	}
}

func TestSlimPodOfAnotherController(t *testing.T) {
	ds := newDS("ds")
	pod := newPod(ds, "web-1", "n1", withRestarts(0, 2))
	fatten(rand.New(rand.NewPCG(1, 1)), pod)
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs-uid", Controller: new(true)},
		{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "cm"}}
	slim := SlimPod(pod)
	want := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: pod.Namespace, UID: pod.UID, CreationTimestamp: pod.CreationTimestamp,
		OwnerReferences: pod.OwnerReferences[:1]}, Spec: v1.PodSpec{NodeName: "n1"}}
	if !reflect.DeepEqual(slim, want) {
		t.Errorf("slim = %+v, want only its identity, controller and node", slim)
	}
	if len(pod.Spec.Containers) == 0 {
		t.Error("SlimPod changed the pod it was given")
	}
}
