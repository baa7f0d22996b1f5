package nodesim

import (
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// podInput is everything decidePod looks at.
type podInput struct {
	Pod       *v1.Pod
	Behaviour Behaviour
	// HostIP is the node's InternalIP.
	HostIP string
	// PodIP is the IP reserved for the pod; hostNetwork pods get HostIP instead.
	PodIP string
	// NodeReady is false while the node's ready knob is off; pods are then not Ready.
	NodeReady bool
	// StopDelay caps how long a pod being deleted lingers.
	StopDelay time.Duration
	// CrashLoopBackOff is the pause before a crash-looping container's second
	// restart, doubled after each later crash (0: a short recovery every time).
	CrashLoopBackOff time.Duration
	// PullFails: the node cannot pull images, so a container given a new image in
	// place never runs it (inplace.go).
	PullFails bool
	// Unpullable are images the node cannot pull (AnnotationUnpullable).
	Unpullable map[string]bool
	// ShuttingDown: the node is shutting down gracefully (AnnotationShutdown).
	ShuttingDown bool
}

// cannotPull reports whether the node cannot pull image.
func (in podInput) cannotPull(image string) bool { return in.PullFails || in.Unpullable[image] }

// podDecision is what to do with a pod, and when to look at it again.
type podDecision struct {
	// Status is the status to write; nil when the stored one is already right.
	Status *v1.PodStatus
	// Delete asks for the pod to be removed now.
	Delete bool
	// RequeueAfter is when the pod's simulated state next changes; 0 means only
	// a change to the pod or its node can change it.
	RequeueAfter time.Duration
}

// podStage is where a pod is in its simulated life.
type podStage int

const (
	// stagePending: the containers are being created.
	stagePending podStage = iota
	// stageRunning: the containers run.
	stageRunning
	// stageCrashed: the containers crashed and wait to be restarted.
	stageCrashed
	// stageEnded: the containers exited and the pod reached Behaviour.EndPhase.
	stageEnded
)

// decidePod is the simulated kubelet: a pure function of the pod, its behaviour,
// its node and the time. The pod's timeline starts at status.startTime, which the
// first decision sets to now rounded up to a whole second.
func decidePod(in podInput, now time.Time) podDecision {
	pod := in.Pod
	if pod.DeletionTimestamp != nil {
		stop := in.StopDelay
		if in.Behaviour.StopAfter > 0 {
			stop = in.Behaviour.StopAfter
		}
		return decideRemoval(in, stop, now)
	}
	if isTerminal(pod.Status.Phase) {
		// Never revive a pod that finished, whoever finished it.
		return podDecision{}
	}
	if in.ShuttingDown {
		return decideShutdown(pod, now)
	}
	start := ceilSecond(now)
	if pod.Status.StartTime != nil {
		start = pod.Status.StartTime.Time
	}
	stage, restarts, next := schedule(in.Behaviour, in.CrashLoopBackOff, now.Sub(start))
	if stage != stagePending && in.Behaviour.waitsForever(pod) {
		// A container that never starts: past its first try, nothing changes.
		stage, restarts, next = stageRunning, 0, 0
	}
	status := buildStatus(in, stage, restarts, start, now)
	d := podDecision{RequeueAfter: next}
	if r := restartingUntil(&status, in.Behaviour.ReadyAfter, now); r > 0 && (d.RequeueAfter == 0 || r < d.RequeueAfter) {
		d.RequeueAfter = r
	}
	if r := resizingUntil(&status, now); r > 0 && (d.RequeueAfter == 0 || r < d.RequeueAfter) {
		d.RequeueAfter = r
	}
	if !apiequality.Semantic.DeepEqual(&status, &pod.Status) {
		d.Status = &status
	}
	return d
}

// schedule places a pod that started elapsed ago on the timeline its behaviour
// describes: its stage, how often its containers restarted, and how long until the
// stage next changes (0: never). A crash-looping container runs for its interval,
// crashes, and is restarted after a pause: a short recovery after its first crash,
// then the back-off (doubling from backoff after each crash, up to
// maxCrashLoopBackOff), as the kubelet restarts it.
func schedule(b Behaviour, backoff, elapsed time.Duration) (podStage, int32, time.Duration) {
	// Without a ready delay a pod runs at once, even while elapsed is below zero
	// because its start was rounded up to the next second.
	if b.ReadyAfter > 0 && elapsed < b.ReadyAfter {
		return stagePending, 0, b.ReadyAfter - elapsed
	}
	if b.EndPhase != "" {
		return stageEnded, 0, 0
	}
	every := b.crashEvery()
	if every <= 0 {
		return stageRunning, 0, 0
	}
	// t is the time since the container's current run started, after crashes.
	t := elapsed - b.ReadyAfter
	var crashes int32
	for {
		down := b.pauseAfter(crashes+1, backoff)
		if down == b.pauseAfter(crashes+2, backoff) {
			// From here on every run lasts every and every pause down.
			period := every + down
			n := t / period
			crashes += int32(n)
			if t -= n * period; t < every {
				return stageRunning, crashes, every - t
			}
			return stageCrashed, crashes + 1, period - t
		}
		if t < every {
			return stageRunning, crashes, every - t
		}
		t -= every
		crashes++
		if t < down {
			return stageCrashed, crashes, down - t
		}
		t -= down
	}
}

// maxCrashLoopBackOff is the longest the kubelet waits to restart a crashed
// container.
const maxCrashLoopBackOff = 5 * time.Minute

// pauseAfter is how long the containers stay down after their nth crash: the
// recovery after the first, then backoff doubled after each crash, capped.
func (b Behaviour) pauseAfter(n int32, backoff time.Duration) time.Duration {
	if n < 2 || backoff <= 0 {
		return b.Recovery()
	}
	d := backoff
	for i := int32(2); i < n && d < maxCrashLoopBackOff; i++ {
		d *= 2
	}
	return max(b.Recovery(), min(d, maxCrashLoopBackOff))
}

func isTerminal(phase v1.PodPhase) bool {
	return phase == v1.PodFailed || phase == v1.PodSucceeded
}

// ceilSecond rounds t up to a whole second, the resolution the API stores times at.
func ceilSecond(t time.Time) time.Time {
	s := t.Truncate(time.Second)
	if s.Before(t) {
		s = s.Add(time.Second)
	}
	return s
}
