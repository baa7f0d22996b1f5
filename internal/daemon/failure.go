package daemon

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/json"
)

// What the new revision's pods have shown: whether each is healthy (past the bake),
// and whether the rollout failed — a pod restarting too often, a container failing,
// or no progress within the deadline.
//
// The healthy-time bake (rollout.everynode.dev/min-healthy): a pod of the current
// revision frees its slot in the update's budget, lets a surged old pod go, finishes
// its wave and counts as progress for the progress deadline only once it has been
// available and Ready, with no container restarted, for min-healthy. The status
// counters do not change: numberAvailable and the rest stay upstream's.

// failingWaits are the reasons a container waits with that mean it will not run
// without a change: the kubelet retries them with a growing back-off.
var failingWaits = map[string]bool{
	"CrashLoopBackOff":           true,
	"ImagePullBackOff":           true,
	"ErrImagePull":               true,
	"CreateContainerConfigError": true,
	"InvalidImageName":           true,
}

// oomKilled is the reason the kubelet gives a container killed for memory.
const oomKilled = "OOMKilled"

// maxWaitMessage bounds how much of the kubelet's own message a condition quotes.
const maxWaitMessage = 200

// healthy reports whether a pod has passed the bake at the decision's time (any
// available pod when there is no bake).
func (u *updater) healthy(pod *v1.Pod) bool {
	if !u.pl.available(pod) || u.inPlacePending(pod) {
		return false
	}
	if u.minHealthy <= 0 {
		return true
	}
	return !u.pl.now.Before(u.healthyAt(pod))
}

// healthyAt is when an available pod passes the bake: min-healthy after its last
// readiness change or container (re)start, and no sooner than it became available.
func (u *updater) healthyAt(pod *v1.Pod) time.Time {
	avail, _ := u.availableSince(pod)
	if u.minHealthy <= 0 {
		return avail
	}
	since := time.Time{}
	if c := readyCondition(pod); c != nil {
		since = c.LastTransitionTime.Time
	}
	for _, statuses := range [][]v1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, s := range statuses {
			if r := s.State.Running; r != nil && r.StartedAt.Time.After(since) {
				since = r.StartedAt.Time
			}
		}
	}
	at := since.Add(u.minHealthy)
	if avail.After(at) {
		at = avail
	}
	return at
}

// availableSince is when an available pod became available.
func (u *updater) availableSince(pod *v1.Pod) (time.Time, bool) {
	c := readyCondition(pod)
	if c == nil || c.LastTransitionTime.IsZero() {
		return time.Time{}, false
	}
	return availableAt(c, u.pl.ds.Spec.MinReadySeconds), true
}

// failure checks the current revision's pods against the policy. Under
// max-restarts, a pod whose containers restarted more than that many times, or one
// with a failing container (containerFailure), fails the rollout at once. With a
// progress deadline, the rollout fails when a pod has been waiting to become available
// for that long while no other pod of the revision became available. Otherwise it
// returns when to check again.
func (u *updater) failure(since time.Time) (Reason, string, time.Duration) {
	pol := u.pol
	var lastAvailable, firstWaiting time.Time
	var waiting *v1.Pod
	var waitingOn string
	for i := range u.nodes {
		n := &u.nodes[i]
		if n.node == nil || n.sick != "" {
			continue
		}
		for _, pod := range n.pods {
			if !u.pl.updated(pod) || u.pl.deleting(pod) || isTerminal(pod) {
				continue
			}
			if pol.MaxRestarts >= 0 {
				if restarts := u.podRestarts(pod); int64(restarts) > pol.MaxRestarts {
					return ReasonRestartLimitExceeded, fmt.Sprintf("pod %s on node %s restarted %d times, more than max-restarts %d",
						pod.Name, n.name, restarts, pol.MaxRestarts), 0
				}
				if container, how := u.containerFailure(pod); container != "" {
					return ReasonContainerFailing, fmt.Sprintf("pod %s on node %s: container %s %s", pod.Name, n.name, container, how), 0
				}
				if how := resizeFailure(pod); how != "" && u.inPlacePending(pod) {
					return ReasonContainerFailing, fmt.Sprintf("pod %s on node %s: %s", pod.Name, n.name, how), 0
				}
			}
			if u.healthy(pod) {
				if at := u.healthyAt(pod); at.After(lastAvailable) {
					lastAvailable = at
				}
			} else if since := u.waitingSince(pod); waiting == nil || since.Before(firstWaiting) {
				waiting, waitingOn, firstWaiting = pod, n.name, since
			}
		}
	}
	if waiting == nil || pol.ProgressDeadline == 0 {
		return "", "", 0
	}
	from := latest(firstWaiting, lastAvailable, since)
	if left := from.Add(pol.ProgressDeadline).Sub(u.pl.now); left > 0 {
		return "", "", left
	}
	return ReasonProgressDeadlineExceeded, fmt.Sprintf("no pod of the new revision became available for %v; pod %s on node %s is still not available",
		pol.ProgressDeadline, waiting.Name, waitingOn), 0
}

// containerFailure finds the first container of the pod, init containers first,
// that is failing, and says how: "" when none is.
// The status of a container that an in-place update restarts is the old image's
// until the kubelet acts on the change: it is left out until then.
func (u *updater) containerFailure(pod *v1.Pod) (container, how string) {
	rec, inPlace := u.inPlaceOf(pod)
	for _, list := range [][]v1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if inPlace && rec.stale(&cs) {
				continue
			}
			if how := failingState(cs); how != "" {
				return cs.Name, how
			}
		}
	}
	return "", ""
}

func failingState(cs v1.ContainerStatus) string {
	reason, how := failingReason(cs)
	switch {
	case reason == "":
		return ""
	case how == waitingNow && cs.State.Waiting.Message != "":
		msg := cs.State.Waiting.Message
		if len(msg) > maxWaitMessage {
			msg = msg[:maxWaitMessage] + "…"
		}
		return fmt.Sprintf("is waiting in %s (%s)", reason, msg)
	case how == waitingNow:
		return "is waiting in " + reason
	case how == terminatedNow:
		return "was killed for memory (" + oomKilled + ")"
	}
	return "was last terminated " + oomKilled
}

// How a container fails, for failingReason.
const (
	waitingNow = iota
	terminatedNow
	terminatedLast
)

// failingReason is the kubelet's reason for a failing container — a failing wait,
// or OOMKilled now or at its last run — and which of the three it is; "" when the
// container is not failing.
func failingReason(cs v1.ContainerStatus) (string, int) {
	if w := cs.State.Waiting; w != nil && failingWaits[w.Reason] {
		return w.Reason, waitingNow
	}
	if t := cs.State.Terminated; t != nil && t.Reason == oomKilled {
		return oomKilled, terminatedNow
	}
	if t := cs.LastTerminationState.Terminated; t != nil && t.Reason == oomKilled {
		return oomKilled, terminatedLast
	}
	return "", 0
}

func restartCount(pod *v1.Pod) int32 {
	var n int32
	for _, s := range pod.Status.InitContainerStatuses {
		n += s.RestartCount
	}
	for _, s := range pod.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

func latest(ts ...time.Time) time.Time {
	var l time.Time
	for _, t := range ts {
		if t.After(l) {
			l = t
		}
	}
	return l
}

// failedMark reads a revision's MarkFailed. A mark counts only while the revision
// keeps the number it failed under: a template changed away and back is renumbered,
// and is tried again.
func failedMark(r *apps.ControllerRevision) (Reason, string, bool) {
	val, ok := r.Annotations[MarkFailed]
	if !ok {
		return "", "", false
	}
	num, rest, _ := strings.Cut(val, " ")
	if n, err := strconv.ParseInt(num, 10, 64); err != nil || n != r.Revision {
		return "", "", false
	}
	reason, msg, _ := strings.Cut(rest, ": ")
	return Reason(reason), msg, true
}

func failedMarkValue(r *apps.ControllerRevision, reason Reason, msg string) string {
	return fmt.Sprintf("%d %s: %s", r.Revision, reason, msg)
}

// inPlaceRecord is the value of AnnotationInPlaceUpdate.
type inPlaceRecord struct {
	Revision string    `json:"revision"`
	At       time.Time `json:"at"`
	// Restarts is each container's restart count when the patch was made.
	Restarts map[string]int32 `json:"restarts,omitempty"`
	// Restarting are the containers the kubelet restarts for their new image, and
	// Images those images.
	Restarting []string          `json:"restarting,omitempty"`
	Images     map[string]string `json:"images,omitempty"`
	// Resized are the containers given new CPU and memory, with them.
	Resized map[string]v1.ResourceRequirements `json:"resized,omitempty"`
}

// inPlaceRecordOf reads a pod's record of its in-place update to its current
// revision; false when it has none, or one for another revision.
func inPlaceRecordOf(pod *v1.Pod) (inPlaceRecord, bool) {
	var r inPlaceRecord
	raw, ok := pod.Annotations[AnnotationInPlaceUpdate]
	if !ok || json.Unmarshal([]byte(raw), &r) != nil || r.Revision != pod.Labels[HashLabel] {
		return inPlaceRecord{}, false
	}
	return r, true
}

// restarted reports whether every container the update restarts has run again
// since the patch.
func (r inPlaceRecord) restarted(pod *v1.Pod) bool {
	for _, name := range r.Restarting {
		if !r.ranAgain(containerStatus(pod, name)) {
			return false
		}
	}
	for name, want := range r.Resized {
		if !resized(containerStatus(pod, name), want) {
			return false
		}
	}
	return true
}

func (r inPlaceRecord) ranAgain(s *v1.ContainerStatus) bool {
	return s != nil && s.RestartCount > r.Restarts[s.Name] && s.State.Running != nil
}

// stale reports whether s is the status of a container the update restarts that
// still tells of its old image: it has not run again, and does not name the new
// image (the kubelet names the image it tries in the status of a container that
// waits).
func (r inPlaceRecord) stale(s *v1.ContainerStatus) bool {
	return slices.Contains(r.Restarting, s.Name) && !r.ranAgain(s) && s.Image != r.Images[s.Name]
}

// restartsSince counts the restarts of pod's containers since the in-place update,
// leaving out the one the update itself caused.
func (r inPlaceRecord) restartsSince(pod *v1.Pod) int32 {
	var n int32
	for _, statuses := range [][]v1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, s := range statuses {
			d := s.RestartCount - r.Restarts[s.Name]
			if slices.Contains(r.Restarting, s.Name) && d > 0 {
				d--
			}
			n += max(d, 0)
		}
	}
	return n
}

func containerStatus(pod *v1.Pod, name string) *v1.ContainerStatus {
	for _, statuses := range [][]v1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range statuses {
			if statuses[i].Name == name {
				return &statuses[i]
			}
		}
	}
	return nil
}

// inPlaceOf is inPlaceRecordOf, decoded once per pod in a decision: the rules ask
// of one pod several times, and a pod keeps its record after the update is done.
func (u *updater) inPlaceOf(pod *v1.Pod) (inPlaceRecord, bool) {
	if _, has := pod.Annotations[AnnotationInPlaceUpdate]; !has {
		return inPlaceRecord{}, false
	}
	if got, ok := u.records[pod.UID]; ok {
		return got.record, got.ok
	}
	r, ok := inPlaceRecordOf(pod)
	if u.records == nil {
		u.records = map[types.UID]decodedRecord{}
	}
	u.records[pod.UID] = decodedRecord{r, ok}
	return r, ok
}

// decodedRecord is a pod's inPlaceRecordOf answer, kept by the updater.
type decodedRecord struct {
	record inPlaceRecord
	ok     bool
}

// inPlacePending reports whether pod is a current pod whose in-place update has
// not taken effect yet: the containers it restarts have not all run again.
func (u *updater) inPlacePending(pod *v1.Pod) bool {
	r, ok := u.inPlaceOf(pod)
	return ok && !r.restarted(pod)
}

// podRestarts is how often the pod's containers restarted while of the current
// revision: since its in-place update, when it had one.
func (u *updater) podRestarts(pod *v1.Pod) int32 {
	if r, ok := u.inPlaceOf(pod); ok {
		return r.restartsSince(pod)
	}
	return restartCount(pod)
}

// waitingSince is when a current pod started to wait to become available: its
// in-place update, or its creation.
func (u *updater) waitingSince(pod *v1.Pod) time.Time {
	if r, ok := u.inPlaceOf(pod); ok {
		return r.At
	}
	return pod.CreationTimestamp.Time
}
