package nodesim

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// TestImageChangedInPlace: a running pod given a new image restarts that container,
// is not Ready for the ready delay, then is Ready again, with one restart more; on a
// node that cannot pull, the new image never starts.
func TestImageChangedInPlace(t *testing.T) {
	sec := time.Second
	type step struct {
		at       time.Duration
		ready    bool
		restarts int32  // of app
		waiting  string // app's waiting reason; "" when it runs
		requeue  time.Duration
	}
	tests := []struct {
		name      string
		pullFails bool
		sidecar   bool
		steps     []step
	}{
		{name: "restarts with the new image after the ready delay", steps: []step{
			{at: 10 * sec, ready: false, restarts: 0, waiting: reasonContainerCreating, requeue: 2 * sec},
			{at: 11 * sec, ready: false, restarts: 0, waiting: reasonContainerCreating, requeue: sec},
			{at: 12 * sec, ready: true, restarts: 1},
			{at: 30 * sec, ready: true, restarts: 1},
		}},
		{name: "the node cannot pull: ErrImagePull, then ImagePullBackOff", pullFails: true, steps: []step{
			{at: 10 * sec, ready: false, restarts: 0, waiting: FailErrImagePull, requeue: 2 * sec},
			{at: 12 * sec, ready: false, restarts: 0, waiting: FailImagePullBackOff},
			{at: 60 * sec, ready: false, restarts: 0, waiting: FailImagePullBackOff},
		}},
		{name: "a sidecar restarts too", sidecar: true, steps: []step{
			{at: 10 * sec, ready: false, restarts: 0, requeue: 2 * sec},
			{at: 12 * sec, ready: true, restarts: 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := fixtureInput(Behaviour{ReadyAfter: 2 * sec})
			if tt.sidecar {
				in.Pod.Spec.InitContainers = []v1.Container{{Name: "proxy", Image: "proxy:1", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)}}
			}
			live(in, 0, 2*sec, 5*sec)
			if !podReady(&in.Pod.Status) {
				t.Fatalf("the pod is not Ready before the change: %+v", in.Pod.Status)
			}
			if tt.sidecar {
				in.Pod.Spec.InitContainers[0].Image = "proxy:2"
			} else {
				in.Pod.Spec.Containers[0].Image = "registry.example/app:2.0"
			}
			in.PullFails = tt.pullFails
			for _, s := range tt.steps {
				d := live(in, s.at)
				st := &in.Pod.Status
				changed := &st.ContainerStatuses[0]
				if tt.sidecar {
					changed = &st.InitContainerStatuses[0]
				}
				if got := podReady(st); got != s.ready {
					t.Errorf("t+%v: Ready %v, want %v", s.at, got, s.ready)
				}
				if app := st.ContainerStatuses[0]; app.RestartCount != s.restarts {
					t.Errorf("t+%v: app restarts %d, want %d", s.at, app.RestartCount, s.restarts)
				}
				waiting := ""
				if w := changed.State.Waiting; w != nil {
					waiting = w.Reason
				}
				if !tt.sidecar && waiting != s.waiting {
					t.Errorf("t+%v: waiting %q, want %q", s.at, waiting, s.waiting)
				}
				if s.ready {
					if changed.State.Running == nil || changed.ImageID != imageID(changed.Image) || changed.RestartCount != 1 {
						t.Errorf("t+%v: the changed container is %+v, want it running its new image after one restart", s.at, changed)
					}
					if restartedAt := t0.Add(12 * sec); !changed.State.Running.StartedAt.Time.Equal(restartedAt) {
						t.Errorf("t+%v: started at %v, want %v, when it restarted", s.at, changed.State.Running.StartedAt, restartedAt)
					}
				}
				if s.requeue != 0 && d.RequeueAfter != s.requeue {
					t.Errorf("t+%v: requeue after %v, want %v", s.at, d.RequeueAfter, s.requeue)
				}
			}
			if other := in.Pod.Status.ContainerStatuses[len(in.Pod.Status.ContainerStatuses)-1]; other.RestartCount != 0 {
				t.Errorf("the unchanged container restarted %d times", other.RestartCount)
			}
		})
	}
}

func TestUnpullableImages(t *testing.T) {
	node := &v1.Node{}
	node.Annotations = map[string]string{AnnotationUnpullable: " registry.example/app:2.0 , other:1"}
	got := unpullable(node)
	if len(got) != 2 || !got["registry.example/app:2.0"] || !got["other:1"] {
		t.Fatalf("unpullable = %v", got)
	}
	in := fixtureInput(Behaviour{ReadyAfter: 2 * time.Second})
	in.Unpullable = got
	in.Pod.Spec.Containers[1].Image = "other:1"
	in.Behaviour.Failures = unpullableFailures(in.Pod, got)
	live(in, 0, 2*time.Second, 5*time.Second)
	if w := in.Pod.Status.ContainerStatuses[1].State.Waiting; w == nil || w.Reason != FailImagePullBackOff {
		t.Errorf("a new pod's container of an unpullable image: %+v, want ImagePullBackOff", in.Pod.Status.ContainerStatuses[1])
	}
	if in.Pod.Status.ContainerStatuses[0].State.Running == nil {
		t.Errorf("the other container does not run: %+v", in.Pod.Status.ContainerStatuses[0])
	}
	in.Pod.Spec.Containers[0].Image = "registry.example/app:2.0"
	live(in, 10*time.Second, 20*time.Second)
	if w := in.Pod.Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != FailImagePullBackOff {
		t.Errorf("changed in place to an unpullable image: %+v, want ImagePullBackOff", in.Pod.Status.ContainerStatuses[0])
	}
}

// TestImageChangedInPlaceWithAShortDelay: a ready delay under a second, in a second
// already begun, still shows the container stopped once, and looks again.
func TestImageChangedInPlaceWithAShortDelay(t *testing.T) {
	in := fixtureInput(Behaviour{ReadyAfter: 300 * time.Millisecond})
	live(in, 0, time.Second, 2*time.Second)
	in.Pod.Spec.Containers[0].Image = "registry.example/app:2.0"
	d := live(in, 10*time.Second+700*time.Millisecond)
	if podReady(&in.Pod.Status) || d.RequeueAfter <= 0 {
		t.Fatalf("just changed: Ready %v, requeue %v; want not Ready, and a look again", podReady(&in.Pod.Status), d.RequeueAfter)
	}
	live(in, 10*time.Second+700*time.Millisecond+d.RequeueAfter)
	if cs := in.Pod.Status.ContainerStatuses[0]; !podReady(&in.Pod.Status) || cs.RestartCount != 1 || cs.State.Running == nil {
		t.Errorf("after the requeue: Ready %v, %+v; want Ready, running again after one restart", podReady(&in.Pod.Status), cs)
	}
}

// TestResizeShowsInTheStatus: a running container's status reports its spec's CPU and
// memory; a resize shows at the next look, without a restart.
func TestResizeShowsInTheStatus(t *testing.T) {
	in := fixtureInput(Behaviour{ReadyAfter: time.Second})
	in.Pod.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceEphemeralStorage: resource.MustParse("1Gi")}
	live(in, 0, time.Second, 2*time.Second)
	if r := in.Pod.Status.ContainerStatuses[0].Resources; r == nil || r.Requests.Cpu().String() != "100m" || len(r.Requests) != 1 {
		t.Fatalf("status resources %v, want the CPU request alone", r)
	}
	in.Pod.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("300m")
	// The resize takes a moment: the container still runs with 100m, its allocation
	// is already 300m, and the pod says a resize is in progress.
	d := live(in, 5*time.Second)
	cs := in.Pod.Status.ContainerStatuses[0]
	if c := podCondition(in.Pod, v1.PodResizeInProgress); c == nil || c.Status != v1.ConditionTrue {
		t.Errorf("during the resize the pod's conditions are %+v; want PodResizeInProgress True", in.Pod.Status.Conditions)
	}
	if cs.Resources.Requests.Cpu().String() != "100m" || cs.AllocatedResources.Cpu().String() != "300m" || d.RequeueAfter != resizeTime {
		t.Errorf("during the resize: resources %v, allocated %v, requeued after %v; want 100m, 300m and %v", cs.Resources, cs.AllocatedResources, d.RequeueAfter, resizeTime)
	}
	live(in, 5*time.Second+resizeTime)
	cs = in.Pod.Status.ContainerStatuses[0]
	if cs.Resources.Requests.Cpu().String() != "300m" || cs.RestartCount != 0 || !podReady(&in.Pod.Status) {
		t.Errorf("after the resize: %+v; want 300m reported, no restart, still Ready", cs)
	}
	if c := podCondition(in.Pod, v1.PodResizeInProgress); c != nil {
		t.Errorf("after the resize the pod still shows %+v", c)
	}
	if in.Pod.Status.ContainerStatuses[1].Resources != nil {
		t.Errorf("a container asking for nothing reports %v", in.Pod.Status.ContainerStatuses[1].Resources)
	}
}
