package nodesim

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func fixturePod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-p", Generation: 1},
		Spec: v1.PodSpec{
			NodeName:   "sim-node-0",
			Containers: []v1.Container{{Name: "app", Image: "registry.example/app:1.0"}, {Name: "log", Image: "busybox"}},
		},
	}
}

func fixtureInput(b Behaviour) podInput {
	return podInput{Pod: fixturePod(), Behaviour: b, HostIP: "10.0.0.1", PodIP: "10.128.0.2", NodeReady: true, StopDelay: time.Second}
}

// live runs decidePod at each offset from t0, writing every decided status back
// into the pod as the API would, and returns the last decision.
func live(in podInput, at ...time.Duration) podDecision {
	var d podDecision
	for _, off := range at {
		d = decidePod(in, t0.Add(off))
		if d.Status != nil {
			in.Pod.Status = *d.Status
		}
	}
	return d
}

// runThenDelete runs the pod from t0 until Ready, then deletes it with grace
// seconds, its deletion timestamp at deadline from t0.
func runThenDelete(in *podInput, deadline time.Duration, grace int64) {
	running := live(*in, 0, in.Behaviour.ReadyAfter)
	if running.Status != nil {
		in.Pod.Status = *running.Status
	}
	in.Pod.DeletionTimestamp = &metav1.Time{Time: t0.Add(deadline)}
	in.Pod.DeletionGracePeriodSeconds = ptr.To(grace)
}

func podCondition(pod *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func TestDecidePod(t *testing.T) {
	sec := time.Second
	type want struct {
		phase    v1.PodPhase
		ready    bool
		restarts int32
		requeue  time.Duration
		noWrite  bool
		delete   bool
	}
	tests := []struct {
		name   string
		beh    Behaviour
		setup  func(*podInput)
		at     []time.Duration
		want   want
		verify func(t *testing.T, pod *v1.Pod)
	}{
		{
			name: "first sight: Pending with start time and IPs, look again after the ready delay",
			beh:  Behaviour{ReadyAfter: sec}, at: []time.Duration{0},
			want: want{phase: v1.PodPending, requeue: sec},
			verify: func(t *testing.T, pod *v1.Pod) {
				st := pod.Status
				if !st.StartTime.Time.Equal(t0) || st.PodIP != "10.128.0.2" || st.HostIP != "10.0.0.1" || len(st.PodIPs) != 1 || len(st.HostIPs) != 1 {
					t.Errorf("status = %+v", st)
				}
				if w := st.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != reasonContainerCreating {
					t.Errorf("container state = %+v, want ContainerCreating", st.ContainerStatuses[0].State)
				}
			},
		},
		{
			name: "start time is rounded up to a whole second",
			beh:  Behaviour{ReadyAfter: sec}, at: []time.Duration{300 * time.Millisecond},
			want: want{phase: v1.PodPending, requeue: 1700 * time.Millisecond},
		},
		{
			name: "no ready delay: Running and Ready on the first write, between two seconds",
			beh:  Behaviour{}, at: []time.Duration{300 * time.Millisecond},
			want: want{phase: v1.PodRunning, ready: true},
		},
		{
			name: "ready delay passed: Running and Ready",
			beh:  Behaviour{ReadyAfter: sec}, at: []time.Duration{0, sec},
			want: want{phase: v1.PodRunning, ready: true},
			verify: func(t *testing.T, pod *v1.Pod) {
				for _, ct := range []v1.PodConditionType{v1.PodScheduled, v1.PodInitialized, v1.ContainersReady, v1.PodReady, v1.PodReadyToStartContainers} {
					if c := podCondition(pod, ct); c == nil || c.Status != v1.ConditionTrue {
						t.Errorf("condition %s = %+v, want True", ct, c)
					}
				}
				if c := podCondition(pod, v1.PodReady); !c.LastTransitionTime.Time.Equal(t0.Add(sec)) || c.ObservedGeneration != 1 {
					t.Errorf("Ready condition = %+v, want transition at t0+1s", c)
				}
				for _, cs := range pod.Status.ContainerStatuses {
					if cs.State.Running == nil || !cs.Ready || !*cs.Started || cs.ImageID == "" || cs.ContainerID == "" || cs.Image == "" {
						t.Errorf("container status = %+v", cs)
					}
				}
			},
		},
		{
			name: "zero ready delay: Running at once",
			beh:  Behaviour{}, at: []time.Duration{0},
			want: want{phase: v1.PodRunning, ready: true},
		},
		{
			name: "ready-after is counted from the start time",
			beh:  Behaviour{ReadyAfter: 5 * sec}, at: []time.Duration{0, 4 * sec},
			want: want{phase: v1.PodPending, requeue: sec, noWrite: true},
		},
		{
			name: "ready-after passed",
			beh:  Behaviour{ReadyAfter: 5 * sec}, at: []time.Duration{0, 4 * sec, 5 * sec},
			want: want{phase: v1.PodRunning, ready: true},
		},
		{
			name: "phase Failed after the ready delay, containers exit 1",
			beh:  Behaviour{ReadyAfter: sec, EndPhase: v1.PodFailed}, at: []time.Duration{0, sec},
			want: want{phase: v1.PodFailed},
			verify: func(t *testing.T, pod *v1.Pod) {
				for _, cs := range pod.Status.ContainerStatuses {
					if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 1 || cs.Ready {
						t.Errorf("container status = %+v, want terminated with exit code 1", cs)
					}
				}
			},
		},
		{
			name: "phase Succeeded after the ready delay, containers exit 0",
			beh:  Behaviour{ReadyAfter: sec, EndPhase: v1.PodSucceeded}, at: []time.Duration{0, sec},
			want: want{phase: v1.PodSucceeded},
			verify: func(t *testing.T, pod *v1.Pod) {
				for _, cs := range pod.Status.ContainerStatuses {
					if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
						t.Errorf("container status = %+v, want terminated with exit code 0", cs)
					}
				}
				if c := podCondition(pod, v1.PodReady); c.Reason != reasonPodCompleted {
					t.Errorf("Ready condition = %+v, want reason PodCompleted", c)
				}
			},
		},
		{
			name: "before the end phase the pod is Pending",
			beh:  Behaviour{ReadyAfter: 3 * sec, EndPhase: v1.PodFailed}, at: []time.Duration{0, 2 * sec},
			want: want{phase: v1.PodPending, requeue: sec, noWrite: true},
		},
		{
			name: "ready=false: Running, never Ready",
			beh:  Behaviour{ReadyAfter: sec, NeverReady: true}, at: []time.Duration{0, sec, time.Hour},
			want: want{phase: v1.PodRunning, noWrite: true},
			verify: func(t *testing.T, pod *v1.Pod) {
				if c := podCondition(pod, v1.ContainersReady); c.Status != v1.ConditionFalse || c.Reason != reasonContainersNotReady {
					t.Errorf("ContainersReady = %+v", c)
				}
				if cs := pod.Status.ContainerStatuses[0]; cs.State.Running == nil || cs.Ready {
					t.Errorf("container status = %+v, want running, not ready", cs)
				}
			},
		},
		{
			name: "restart-every: the first crash shows the ended run and drops Ready; restarted with no back-off",
			beh:  Behaviour{ReadyAfter: sec, RestartEvery: 10 * sec}, at: []time.Duration{0, sec, 11 * sec},
			want: want{phase: v1.PodRunning, restarts: 0, requeue: sec},
			verify: func(t *testing.T, pod *v1.Pod) {
				cs := pod.Status.ContainerStatuses[0]
				if term := cs.State.Terminated; term == nil || term.ExitCode != 1 || !term.StartedAt.Time.Equal(t0.Add(sec)) || cs.LastTerminationState.Terminated != nil {
					t.Errorf("container status = %+v, want the crashed run, terminated", cs)
				}
			},
		},
		{
			name: "restart-every: a later crash raises restartCount and waits in CrashLoopBackOff",
			beh:  Behaviour{ReadyAfter: sec, RestartEvery: 10 * sec}, at: []time.Duration{0, sec, 11 * sec, 12 * sec, 22 * sec},
			want: want{phase: v1.PodRunning, restarts: 2, requeue: sec},
			verify: func(t *testing.T, pod *v1.Pod) {
				cs := pod.Status.ContainerStatuses[0]
				if cs.State.Waiting == nil || cs.State.Waiting.Reason != reasonCrashLoopBackOff || cs.LastTerminationState.Terminated == nil {
					t.Errorf("container status = %+v, want CrashLoopBackOff after a terminated run", cs)
				}
			},
		},
		{
			name: "restart-every: Ready again after the recovery",
			beh:  Behaviour{ReadyAfter: sec, RestartEvery: 10 * sec}, at: []time.Duration{0, sec, 11 * sec, 12 * sec},
			want: want{phase: v1.PodRunning, ready: true, restarts: 1, requeue: 10 * sec},
			verify: func(t *testing.T, pod *v1.Pod) {
				cs := pod.Status.ContainerStatuses[0]
				if cs.State.Running == nil || !cs.State.Running.StartedAt.Time.Equal(t0.Add(12*sec)) || cs.LastTerminationState.Terminated.ExitCode != 1 {
					t.Errorf("container status = %+v", cs)
				}
			},
		},
		{
			name: "restart-every: a late look counts every missed restart",
			beh:  Behaviour{ReadyAfter: sec, RestartEvery: 10 * sec}, at: []time.Duration{0, sec, 35 * sec},
			want: want{phase: v1.PodRunning, ready: true, restarts: 3, requeue: 9 * sec},
		},
		{
			name: "nothing changed: no write",
			beh:  Behaviour{ReadyAfter: sec}, at: []time.Duration{0, sec, 2 * sec, time.Hour},
			want: want{phase: v1.PodRunning, ready: true, noWrite: true},
			verify: func(t *testing.T, pod *v1.Pod) {
				if c := podCondition(pod, v1.PodReady); !c.LastTransitionTime.Time.Equal(t0.Add(sec)) {
					t.Errorf("Ready transition time moved to %v", c.LastTransitionTime)
				}
			},
		},
		{
			name:  "a Failed pod is never revived",
			beh:   Behaviour{ReadyAfter: sec},
			setup: func(in *podInput) { in.Pod.Status.Phase = v1.PodFailed },
			at:    []time.Duration{0, time.Hour},
			want:  want{phase: v1.PodFailed, noWrite: true},
		},
		{
			name:  "a Succeeded pod is never revived",
			beh:   Behaviour{ReadyAfter: sec},
			setup: func(in *podInput) { in.Pod.Status.Phase = v1.PodSucceeded },
			at:    []time.Duration{0},
			want:  want{phase: v1.PodSucceeded, noWrite: true},
		},
		{
			name: "being deleted: lingers for the stop delay",
			beh:  Behaviour{ReadyAfter: sec},
			setup: func(in *podInput) {
				in.Pod.DeletionTimestamp = &metav1.Time{Time: t0.Add(32 * sec)}
				in.Pod.DeletionGracePeriodSeconds = ptr.To[int64](30)
			},
			at:   []time.Duration{2500 * time.Millisecond},
			want: want{requeue: 500 * time.Millisecond, noWrite: true},
		},
		{
			name: "being deleted: its containers stopped, the pod ends Succeeded",
			beh:  Behaviour{ReadyAfter: sec},
			setup: func(in *podInput) {
				runThenDelete(in, 32*sec, 30)
			},
			at:   []time.Duration{3 * sec},
			want: want{phase: v1.PodSucceeded, requeue: 500 * time.Millisecond},
			verify: func(t *testing.T, pod *v1.Pod) {
				if s := pod.Status.ContainerStatuses[0].State.Terminated; s == nil || s.ExitCode != 0 || s.Reason != reasonCompleted {
					t.Errorf("container state = %+v, want terminated Completed, exit 0", pod.Status.ContainerStatuses[0].State)
				}
			},
		},
		{
			name: "being deleted: removed a moment after it ended",
			beh:  Behaviour{ReadyAfter: sec},
			setup: func(in *podInput) {
				runThenDelete(in, 32*sec, 30)
			},
			at:   []time.Duration{3 * sec, 3500 * time.Millisecond},
			want: want{phase: v1.PodSucceeded, noWrite: true, delete: true},
		},
		{
			name: "being deleted: a grace period shorter than the stop delay wins: killed, Failed",
			beh:  Behaviour{ReadyAfter: sec},
			setup: func(in *podInput) {
				in.StopDelay = time.Minute
				runThenDelete(in, 4*sec, 2)
			},
			at:   []time.Duration{4 * sec},
			want: want{phase: v1.PodFailed, requeue: sec},
			verify: func(t *testing.T, pod *v1.Pod) {
				if s := pod.Status.ContainerStatuses[0].State.Terminated; s == nil || s.ExitCode != exitKilled || s.Reason != reasonError {
					t.Errorf("container state = %+v, want terminated Error, exit 137", pod.Status.ContainerStatuses[0].State)
				}
				if c := podCondition(pod, v1.ContainersReady); c == nil || c.Status != v1.ConditionFalse {
					t.Errorf("ContainersReady = %+v, want False", c)
				}
			},
		},
		{
			name: "being deleted: stop-after replaces the node's stop delay",
			beh:  Behaviour{ReadyAfter: sec, StopAfter: 3 * sec},
			setup: func(in *podInput) {
				runThenDelete(in, 32*sec, 30)
			},
			at:   []time.Duration{4 * sec},
			want: want{phase: v1.PodRunning, ready: true, requeue: sec, noWrite: true},
		},
		{
			name: "being deleted: the grace period cuts stop-after short",
			beh:  Behaviour{ReadyAfter: sec, StopAfter: 10 * sec},
			setup: func(in *podInput) {
				runThenDelete(in, 4*sec, 2)
			},
			at:   []time.Duration{4 * sec, 5 * sec},
			want: want{phase: v1.PodFailed, delete: true, noWrite: true},
		},
		{
			name: "being deleted: a finished pod is removed too",
			beh:  Behaviour{ReadyAfter: sec},
			setup: func(in *podInput) {
				in.Pod.Status.Phase = v1.PodFailed
				in.Pod.DeletionTimestamp = &metav1.Time{Time: t0}
				in.Pod.DeletionGracePeriodSeconds = ptr.To[int64](0)
			},
			at:   []time.Duration{0},
			want: want{phase: v1.PodFailed, delete: true, noWrite: true},
		},
		{
			name:  "hostNetwork pods get the node IP",
			beh:   Behaviour{},
			setup: func(in *podInput) { in.Pod.Spec.HostNetwork, in.PodIP = true, "" },
			at:    []time.Duration{0},
			want:  want{phase: v1.PodRunning, ready: true},
			verify: func(t *testing.T, pod *v1.Pod) {
				if pod.Status.PodIP != "10.0.0.1" || pod.Status.PodIPs[0].IP != "10.0.0.1" {
					t.Errorf("pod IP = %s, want the node IP", pod.Status.PodIP)
				}
			},
		},
		{
			name:  "node not ready: the pod is not Ready",
			beh:   Behaviour{},
			setup: func(in *podInput) { in.NodeReady = false },
			at:    []time.Duration{0},
			want:  want{phase: v1.PodRunning},
			verify: func(t *testing.T, pod *v1.Pod) {
				if c := podCondition(pod, v1.PodReady); c.Reason != reasonNodeNotReady {
					t.Errorf("Ready = %+v, want reason NodeNotReady", c)
				}
				if c := podCondition(pod, v1.ContainersReady); c.Status != v1.ConditionTrue {
					t.Errorf("ContainersReady = %+v, want True", c)
				}
			},
		},
		{
			name: "an unmet readiness gate keeps the pod not Ready",
			beh:  Behaviour{},
			setup: func(in *podInput) {
				in.Pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb"}}
			},
			at:   []time.Duration{0},
			want: want{phase: v1.PodRunning},
		},
		{
			name: "the scheduler's PodScheduled condition and the QoS class are kept",
			beh:  Behaviour{},
			setup: func(in *podInput) {
				in.Pod.Status.QOSClass = v1.PodQOSBestEffort
				in.Pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))}}
			},
			at:   []time.Duration{0},
			want: want{phase: v1.PodRunning, ready: true},
			verify: func(t *testing.T, pod *v1.Pod) {
				if c := podCondition(pod, v1.PodScheduled); !c.LastTransitionTime.Time.Equal(t0.Add(-time.Hour)) {
					t.Errorf("PodScheduled = %+v", c)
				}
				if pod.Status.QOSClass != v1.PodQOSBestEffort {
					t.Errorf("QOSClass = %q", pod.Status.QOSClass)
				}
			},
		},
		{
			name: "init containers complete and sidecars run",
			beh:  Behaviour{},
			setup: func(in *podInput) {
				in.Pod.Spec.InitContainers = []v1.Container{
					{Name: "setup", Image: "busybox"},
					{Name: "proxy", Image: "envoy", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)},
				}
			},
			at:   []time.Duration{0},
			want: want{phase: v1.PodRunning, ready: true},
			verify: func(t *testing.T, pod *v1.Pod) {
				ics := pod.Status.InitContainerStatuses
				if len(ics) != 2 || ics[0].State.Terminated == nil || ics[0].State.Terminated.ExitCode != 0 || ics[1].State.Running == nil || !ics[1].Ready {
					t.Errorf("init container statuses = %+v", ics)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := fixtureInput(tt.beh)
			if tt.setup != nil {
				tt.setup(&in)
			}
			d := live(in, tt.at...)
			pod := in.Pod
			if pod.Status.Phase != tt.want.phase {
				t.Errorf("phase = %q, want %q", pod.Status.Phase, tt.want.phase)
			}
			if got := podReady(&pod.Status); got != tt.want.ready {
				t.Errorf("ready = %v, want %v", got, tt.want.ready)
			}
			for _, cs := range pod.Status.ContainerStatuses {
				if cs.RestartCount != tt.want.restarts {
					t.Errorf("container %s restartCount = %d, want %d", cs.Name, cs.RestartCount, tt.want.restarts)
				}
			}
			if d.RequeueAfter != tt.want.requeue {
				t.Errorf("RequeueAfter = %v, want %v", d.RequeueAfter, tt.want.requeue)
			}
			if (d.Status == nil) != tt.want.noWrite {
				t.Errorf("wrote status = %v, want %v", d.Status != nil, !tt.want.noWrite)
			}
			if d.Delete != tt.want.delete {
				t.Errorf("Delete = %v, want %v", d.Delete, tt.want.delete)
			}
			if tt.verify != nil {
				tt.verify(t, pod)
			}
		})
	}
}

func TestSchedule(t *testing.T) {
	sec := time.Second
	crash := Behaviour{ReadyAfter: 2 * sec, RestartEvery: 10 * sec}
	const backoff = 10 * time.Second
	tests := []struct {
		name     string
		beh      Behaviour
		backoff  time.Duration
		elapsed  time.Duration
		stage    podStage
		restarts int32
		next     time.Duration
	}{
		{"pending until the ready delay", Behaviour{ReadyAfter: 2 * sec}, backoff, sec, stagePending, 0, sec},
		{"running after it, nothing to wait for", Behaviour{ReadyAfter: 2 * sec}, backoff, 2 * sec, stageRunning, 0, 0},
		{"no ready delay: running before the rounded-up start", Behaviour{}, backoff, -700 * time.Millisecond, stageRunning, 0, 0},
		{"no ready delay, crash loop: the first run lasts from the start", Behaviour{RestartEvery: 10 * sec}, backoff, -700 * time.Millisecond, stageRunning, 0, 10*sec + 700*time.Millisecond},
		{"end phase after the delay", Behaviour{ReadyAfter: 2 * sec, EndPhase: v1.PodFailed}, backoff, 2 * sec, stageEnded, 0, 0},
		// Without a back-off: each run lasts 10s, each pause the 1s recovery.
		{"crash loop: first run", crash, 0, 5 * sec, stageRunning, 0, 7 * sec},
		{"crash loop: crashed", crash, 0, 12 * sec, stageCrashed, 1, sec},
		{"crash loop: recovering", crash, 0, 12*sec + 999*time.Millisecond, stageCrashed, 1, time.Millisecond},
		{"crash loop: recovered", crash, 0, 13 * sec, stageRunning, 1, 10 * sec},
		{"crash loop: tenth crash", crash, 0, 111 * sec, stageCrashed, 10, sec},
		// With the kubelet's back-off: restarted at once (after the recovery) after
		// the first crash, then after 10s, 20s, 40s … up to 5 minutes.
		{"back-off: first crash, recovering", crash, backoff, 12 * sec, stageCrashed, 1, sec},
		{"back-off: second run", crash, backoff, 13 * sec, stageRunning, 1, 10 * sec},
		{"back-off: second crash waits 10s", crash, backoff, 25 * sec, stageCrashed, 2, 8 * sec},
		{"back-off: third run", crash, backoff, 33 * sec, stageRunning, 2, 10 * sec},
		{"back-off: third crash waits 20s", crash, backoff, 50 * sec, stageCrashed, 3, 13 * sec},
		{"back-off: capped at 5 minutes", crash, backoff, 702 * sec, stageCrashed, 8, 291 * sec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stage, restarts, next := schedule(tt.beh, tt.backoff, tt.elapsed)
			if stage != tt.stage || restarts != tt.restarts || next != tt.next {
				t.Errorf("schedule = (%v, %d, %v), want (%v, %d, %v)", stage, restarts, next, tt.stage, tt.restarts, tt.next)
			}
		})
	}
}

func TestCeilSecond(t *testing.T) {
	if got := ceilSecond(t0); !got.Equal(t0) {
		t.Errorf("whole second moved: %v", got)
	}
	if got := ceilSecond(t0.Add(time.Nanosecond)); !got.Equal(t0.Add(time.Second)) {
		t.Errorf("ceilSecond(t0+1ns) = %v", got)
	}
}
