package nodesim

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseFailures(t *testing.T) {
	tests := []struct {
		in      string
		want    []Failure
		wantErr bool
	}{
		{"ErrImagePull", []Failure{{Reason: FailErrImagePull}}, false},
		{"app=OOMKilled", []Failure{{Container: "app", Reason: FailOOMKilled}}, false},
		{" init = CreateContainerConfigError , log=InvalidImageName", []Failure{
			{Container: "init", Reason: FailCreateContainerConfigError}, {Container: "log", Reason: FailInvalidImageName}}, false},
		{"ImagePullBackOff", []Failure{{Reason: FailImagePullBackOff}}, false},
		{"CrashLoop", nil, true},
		{"errimagepull", nil, true},
		{"=OOMKilled", nil, true},
		{"", nil, true},
		{"app=OOMKilled,", nil, true},
	}
	for _, tt := range tests {
		got, err := parseFailures(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("parseFailures(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("parseFailures(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestCheckFailures(t *testing.T) {
	pod := fixturePod()
	pod.Spec.InitContainers = []v1.Container{{Name: "setup", Image: "busybox"}}
	in := []Failure{{Reason: FailErrImagePull}, {Container: "log", Reason: FailOOMKilled}, {Container: "setup", Reason: FailInvalidImageName},
		{Container: "missing", Reason: FailErrImagePull}, {Container: "setup", Reason: FailOOMKilled}}
	kept, errs := checkFailures(in, pod)
	if diff := cmp.Diff(in[:3], kept); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
	if len(errs) != 2 {
		t.Errorf("errors = %v, want one for the missing container and one for OOMKilled of an init container", errs)
	}
}

// waiting is the reason a container of the pod waits with ("" when it does not wait).
func waiting(statuses []v1.ContainerStatus, name string) string {
	for _, cs := range statuses {
		if cs.Name == name && cs.State.Waiting != nil {
			return cs.State.Waiting.Reason
		}
	}
	return ""
}

func TestDecidePodFailures(t *testing.T) {
	sec := time.Second
	withInit := func(in *podInput) {
		in.Pod.Spec.InitContainers = []v1.Container{{Name: "setup", Image: "registry.example/setup:1"}, {Name: "later", Image: "busybox"}}
	}
	tests := []struct {
		name   string
		fail   []Failure
		every  time.Duration
		setup  func(*podInput)
		at     []time.Duration
		verify func(t *testing.T, pod *v1.Pod, d podDecision)
	}{
		{
			name: "an image that cannot be pulled: ErrImagePull for the first pull, Pending",
			fail: []Failure{{Reason: FailErrImagePull}}, at: []time.Duration{0},
			verify: func(t *testing.T, pod *v1.Pod, d podDecision) {
				if pod.Status.Phase != v1.PodPending || waiting(pod.Status.ContainerStatuses, "app") != FailErrImagePull || d.RequeueAfter != sec {
					t.Errorf("phase %s, app waits in %q, requeue %v", pod.Status.Phase, waiting(pod.Status.ContainerStatuses, "app"), d.RequeueAfter)
				}
			},
		},
		{
			name: "an image that cannot be pulled: ImagePullBackOff after, for ever, no restart",
			fail: []Failure{{Reason: FailErrImagePull}}, every: 2 * sec, at: []time.Duration{0, sec, time.Hour},
			verify: func(t *testing.T, pod *v1.Pod, d podDecision) {
				cs := pod.Status.ContainerStatuses[0]
				if pod.Status.Phase != v1.PodPending || waiting(pod.Status.ContainerStatuses, "app") != FailImagePullBackOff ||
					cs.RestartCount != 0 || cs.Ready || *cs.Started || d.RequeueAfter != 0 || d.Status != nil {
					t.Errorf("phase %s, status %+v, decision %+v", pod.Status.Phase, cs, d)
				}
				if c := podCondition(pod, v1.PodReady); c.Status != v1.ConditionFalse {
					t.Errorf("Ready = %+v", c)
				}
			},
		},
		{
			name: "one container fails: the other runs, the pod is Pending and not Ready",
			fail: []Failure{{Container: "log", Reason: FailCreateContainerConfigError}}, at: []time.Duration{0, sec},
			verify: func(t *testing.T, pod *v1.Pod, _ podDecision) {
				if waiting(pod.Status.ContainerStatuses, "log") != FailCreateContainerConfigError || pod.Status.ContainerStatuses[0].State.Running == nil {
					t.Errorf("statuses = %+v", pod.Status.ContainerStatuses)
				}
				if c := podCondition(pod, v1.ContainersReady); pod.Status.Phase != v1.PodPending || c.Status != v1.ConditionFalse || c.Message != "containers with unready status: [log]" {
					t.Errorf("phase %s, ContainersReady %+v", pod.Status.Phase, c)
				}
			},
		},
		{
			name: "InvalidImageName",
			fail: []Failure{{Reason: FailInvalidImageName}}, at: []time.Duration{0, sec},
			verify: func(t *testing.T, pod *v1.Pod, _ podDecision) {
				if waiting(pod.Status.ContainerStatuses, "app") != FailInvalidImageName || waiting(pod.Status.ContainerStatuses, "log") != FailInvalidImageName {
					t.Errorf("statuses = %+v", pod.Status.ContainerStatuses)
				}
			},
		},
		{
			name: "an init container that cannot start holds the later ones and the app",
			fail: []Failure{{Container: "setup", Reason: FailImagePullBackOff}}, setup: withInit, at: []time.Duration{0, sec},
			verify: func(t *testing.T, pod *v1.Pod, _ podDecision) {
				st := pod.Status
				if waiting(st.InitContainerStatuses, "setup") != FailImagePullBackOff || waiting(st.InitContainerStatuses, "later") != reasonPodInitializing ||
					waiting(st.ContainerStatuses, "app") != reasonPodInitializing || st.Phase != v1.PodPending {
					t.Errorf("status = %+v", st)
				}
				if c := podCondition(pod, v1.PodInitialized); c.Status != v1.ConditionFalse || c.Reason != reasonContainersNotInitialized {
					t.Errorf("Initialized = %+v", c)
				}
			},
		},
		{
			name: "a failure without a name is not an init container's",
			fail: []Failure{{Reason: FailErrImagePull}}, setup: withInit, at: []time.Duration{0, sec},
			verify: func(t *testing.T, pod *v1.Pod, _ podDecision) {
				if s := pod.Status.InitContainerStatuses[0]; s.State.Terminated == nil || s.State.Terminated.ExitCode != 0 {
					t.Errorf("init status = %+v, want completed", s)
				}
			},
		},
		{
			name: "OOMKilled: the named container is killed for memory every 2s by default, the other runs on",
			fail: []Failure{{Container: "app", Reason: FailOOMKilled}}, at: []time.Duration{0, sec, 3 * sec, 4 * sec, 6 * sec},
			verify: func(t *testing.T, pod *v1.Pod, _ podDecision) {
				app, log := pod.Status.ContainerStatuses[0], pod.Status.ContainerStatuses[1]
				last := app.LastTerminationState.Terminated
				if app.RestartCount != 2 || waiting(pod.Status.ContainerStatuses, "app") != reasonCrashLoopBackOff || last == nil ||
					last.Reason != reasonOOMKilled || last.ExitCode != exitCodeOOMKilled {
					t.Errorf("app status = %+v", app)
				}
				if log.RestartCount != 0 || log.State.Running == nil || !log.Ready {
					t.Errorf("log status = %+v, want running, untouched", log)
				}
				if pod.Status.Phase != v1.PodRunning {
					t.Errorf("phase = %s", pod.Status.Phase)
				}
			},
		},
		{
			name: "OOMKilled: the first kill shows as the container's state",
			fail: []Failure{{Reason: FailOOMKilled}}, at: []time.Duration{0, sec, 3 * sec},
			verify: func(t *testing.T, pod *v1.Pod, _ podDecision) {
				for _, cs := range pod.Status.ContainerStatuses {
					if term := cs.State.Terminated; term == nil || term.Reason != reasonOOMKilled || term.ExitCode != exitCodeOOMKilled {
						t.Errorf("status = %+v", cs)
					}
				}
			},
		},
		{
			name: "OOMKilled keeps its reason once the container runs again, at the restart-every given",
			fail: []Failure{{Reason: FailOOMKilled}}, every: 10 * sec, at: []time.Duration{0, sec, 11 * sec, 12 * sec},
			verify: func(t *testing.T, pod *v1.Pod, d podDecision) {
				for _, cs := range pod.Status.ContainerStatuses {
					if cs.State.Running == nil || cs.RestartCount != 1 || cs.LastTerminationState.Terminated.Reason != reasonOOMKilled {
						t.Errorf("status = %+v", cs)
					}
				}
				if d.RequeueAfter != 10*sec {
					t.Errorf("requeue = %v", d.RequeueAfter)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := fixtureInput(Behaviour{ReadyAfter: sec, RestartEvery: tt.every, Failures: tt.fail})
			if tt.setup != nil {
				tt.setup(&in)
			}
			d := live(in, tt.at...)
			if in.Pod.Status.StartTime == nil {
				t.Fatal("no status written")
			}
			tt.verify(t, in.Pod, d)
		})
	}
}

func TestNodeFailures(t *testing.T) {
	node := func(v string) *v1.Node {
		n := &v1.Node{}
		n.Annotations = map[string]string{AnnotationFail: v}
		return n
	}
	if fs, err := nodeFailures(node("ErrImagePull")); err != nil || len(fs) != 1 || fs[0].Reason != FailErrImagePull {
		t.Errorf("nodeFailures(ErrImagePull) = %v, %v", fs, err)
	}
	if _, err := nodeFailures(node("app=ErrImagePull")); err == nil {
		t.Error("a container name on a Node is accepted")
	}
	if fs, err := nodeFailures(&v1.Node{}); fs != nil || err != nil {
		t.Errorf("no annotation: %v, %v", fs, err)
	}
}

// A node that cannot pull images: a pod that starts there while the annotation is
// set waits in ErrImagePull, then ImagePullBackOff; a pod already running is left
// alone; once the annotation goes, the waiting pod starts.
func TestNodeFailAnnotation(t *testing.T) {
	h := startSimulator(t, testConfig(1))
	h.eventually("sim-node-0", func() bool { return h.node("sim-node-0") != nil })
	h.createPod(boundPod("running", "sim-node-0", nil))
	h.advanceUntil("pod Ready", 100*time.Millisecond, func() bool { return readyIs(h.pod("running"), true) })

	setFail := func(value string) {
		node := h.node("sim-node-0")
		if value == "" {
			delete(node.Annotations, AnnotationFail)
		} else {
			metav1.SetMetaDataAnnotation(&node.ObjectMeta, AnnotationFail, value)
		}
		if _, err := h.client.CoreV1().Nodes().Update(h.ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setFail(FailErrImagePull)
	h.eventually("the node's annotation seen", func() bool { return h.node("sim-node-0").Annotations[AnnotationFail] != "" })
	h.createPod(boundPod("new", "sim-node-0", nil))
	h.advanceUntil("new pod in ImagePullBackOff", 100*time.Millisecond, func() bool {
		return waiting(h.pod("new").Status.ContainerStatuses, "app") == FailImagePullBackOff
	})
	h.holds("the running pod is left alone", 100*time.Millisecond, 5, func() bool { return readyIs(h.pod("running"), true) })
	if p := h.pod("new"); p.Status.Phase != v1.PodPending {
		t.Errorf("phase = %s, want Pending", p.Status.Phase)
	}
	setFail("")
	h.advanceUntil("the new pod starts once the node pulls again", 100*time.Millisecond, func() bool { return readyIs(h.pod("new"), true) })
}
