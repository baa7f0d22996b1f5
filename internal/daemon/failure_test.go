package daemon

import (
	"slices"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
)

// How a rollout fails (progress deadline, restart limit), what it does then (pause or
// roll back), the marks it leaves on revisions, and which revision nodes that join
// mid-rollout get. Rows start from policyCluster, as in gate_test.go.

// curRev is the name of the current revision of newDS("ds") in policyCluster.
var curRev = "ds-" + hashOf(newDS("ds"))

func rollingOutSince(d time.Duration) dsOpt {
	return withProgressing(ReasonRollingOut, v1.ConditionTrue, t0.Add(-d))
}

// waitingOnN1 replaces n1's pod by a pod of the current revision, created that long
// ago and not Ready.
func waitingOnN1(created time.Duration, opts ...podOpt) func(*apps.DaemonSet, *Snapshot) {
	return func(ds *apps.DaemonSet, s *Snapshot) {
		replace(s, newPod(ds, "new-n1", "n1", append([]podOpt{notReady(), createdAt(t0.Add(-created))}, opts...)...))
	}
}

// annotate sets an annotation on the snapshot's revision of that name.
func annotate(s *Snapshot, name, key, value string) {
	for _, r := range s.Revisions {
		if r.Name == name {
			if r.Annotations == nil {
				r.Annotations = map[string]string{}
			}
			r.Annotations[key] = value
		}
	}
}

func then(steps ...func(*apps.DaemonSet, *Snapshot)) func(*apps.DaemonSet, *Snapshot) {
	return func(ds *apps.DaemonSet, s *Snapshot) {
		for _, step := range steps {
			step(ds, s)
		}
	}
}

func TestRolloutProgressDeadline(t *testing.T) {
	deadline := withAnnotations(AnnotationProgressDeadline, "10m")
	failedMark := curRev + " " + MarkFailed + "=2 " + string(ReasonProgressDeadlineExceeded) + ": "
	runRolloutRows(t, []rolloutRow{
		{name: "not reached: look again when it runs out", ds: []dsOpt{deadline, rollingOutSince(5 * time.Minute), withBudget("", "2")},
			setup: waitingOnN1(8 * time.Minute), deletes: []string{"old-n2"}, requeue: 5 * time.Minute,
			reason: ReasonRollingOut, status: v1.ConditionTrue, events: []string{}},
		{name: "exceeded: the revision is marked failed and every node holds", ds: []dsOpt{deadline, rollingOutSince(20 * time.Minute), withBudget("", "2")},
			setup:  waitingOnN1(15 * time.Minute),
			marks:  []string{failedMark + "no pod of the new revision became available for 10m0s; pod new-n1 on node n1 is still not available"},
			reason: ReasonProgressDeadlineExceeded, status: v1.ConditionFalse, message: "revision 2 failed",
			events: []string{string(ReasonProgressDeadlineExceeded)},
			waits:  with(all(ReasonProgressDeadlineExceeded, "n1"), "n1", string(ReasonNewPodUnavailable))},
		{name: "exceeded with maxSurge: no surge pod", ds: []dsOpt{deadline, rollingOutSince(20 * time.Minute), withBudget("2", "0")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				s.Pods = append(s.Pods, newPod(ds, "new-n1", "n1", notReady(), createdAt(t0.Add(-15*time.Minute))))
			},
			marks: []string{failedMark}, reason: ReasonProgressDeadlineExceeded, status: v1.ConditionFalse},
		{name: "counts from the pod's creation", ds: []dsOpt{deadline, rollingOutSince(20 * time.Minute), withBudget("", "2")},
			setup: waitingOnN1(3 * time.Minute), deletes: []string{"old-n2"}, requeue: 7 * time.Minute},
		{name: "counts from the last time a pod of the revision passed the bake", ds: []dsOpt{deadline, rollingOutSince(20 * time.Minute), withBudget("", "2")},
			setup: then(waitingOnN1(15*time.Minute), func(ds *apps.DaemonSet, s *Snapshot) {
				replace(s, newPod(ds, "new-n2", "n2", readySince(t0.Add(-4*time.Minute))))
			}),
			// Ready 4m ago, healthy (the default 10s bake) 3m50s ago: 6m10s left of 10m.
			deletes: []string{"old-n3"}, requeue: 6*time.Minute + DefaultMinHealthy},
		{name: "counts from when the rollout turned RollingOut: a hold before does not count",
			ds:    []dsOpt{deadline, withProgressing(ReasonPaused, v1.ConditionUnknown, t0.Add(-time.Hour)), withBudget("", "1")},
			setup: waitingOnN1(time.Hour), requeue: 10 * time.Minute,
			reason: ReasonRollingOut, status: v1.ConditionTrue, events: []string{string(ReasonRollingOut)}},
		{name: "while paused the deadline does not run out",
			ds:    []dsOpt{deadline, withAnnotations(AnnotationPaused, "true"), withProgressing(ReasonPaused, v1.ConditionUnknown, t0.Add(-time.Hour)), withBudget("", "1")},
			setup: waitingOnN1(time.Hour), requeue: 10 * time.Minute, reason: ReasonPaused, status: v1.ConditionUnknown},
		{name: "without progress-deadline a pod may wait any time", ds: []dsOpt{withAnnotations(AnnotationMaxRestarts, "5"), rollingOutSince(20 * time.Hour), withBudget("", "2")},
			setup: waitingOnN1(15 * time.Hour), deletes: []string{"old-n2"}, reason: ReasonRollingOut, status: v1.ConditionTrue},
		{name: "a terminating pod of the revision is not waited for", ds: []dsOpt{deadline, rollingOutSince(20 * time.Minute), withBudget("", "2")},
			setup: waitingOnN1(15*time.Minute, terminating()), deletes: []string{"old-n2"}},
		{name: "on-failure pause: held, no rollback", ds: []dsOpt{deadline, withAnnotations(AnnotationOnFailure, "pause"), rollingOutSince(20 * time.Minute)},
			setup: waitingOnN1(15 * time.Minute), marks: []string{failedMark}, reason: ReasonProgressDeadlineExceeded, status: v1.ConditionFalse},
		{name: "on-failure rollback: back to the previous revision", ds: []dsOpt{deadline, withAnnotations(AnnotationOnFailure, "rollback"), rollingOutSince(20 * time.Minute), withBudget("", "2")},
			setup: waitingOnN1(15 * time.Minute), marks: []string{failedMark, "ds-old " + MarkRestored + "=3 from 2 at 2030-01-01T12:00:00Z"}, rollback: "ds-old",
			reason: ReasonRolledBack, status: v1.ConditionFalse, message: "rolled back to the template of revision 1",
			events: []string{string(ReasonRolledBack)}},
		{name: "on-failure rollback without an earlier revision: held", ds: []dsOpt{deadline, withAnnotations(AnnotationOnFailure, "rollback"), rollingOutSince(20 * time.Minute)},
			setup: then(waitingOnN1(15*time.Minute), func(ds *apps.DaemonSet, s *Snapshot) { s.Revisions = s.Revisions[1:] }),
			marks: []string{failedMark}, reason: ReasonProgressDeadlineExceeded, status: v1.ConditionFalse, message: "no earlier revision to roll back to"},
	})
}

func TestRolloutMaxRestarts(t *testing.T) {
	limit := func(n string) dsOpt { return withAnnotations(AnnotationMaxRestarts, n) }
	failedMark := curRev + " " + MarkFailed + "=2 " + string(ReasonRestartLimitExceeded) + ": "
	runRolloutRows(t, []rolloutRow{
		{name: "exceeded, init and regular restarts summed: failed at once", ds: []dsOpt{limit("3"), withBudget("", "3")},
			setup:  func(ds *apps.DaemonSet, s *Snapshot) { replace(s, newPod(ds, "new-n1", "n1", withRestarts(1, 3))) },
			marks:  []string{failedMark + "pod new-n1 on node n1 restarted 4 times, more than max-restarts 3"},
			reason: ReasonRestartLimitExceeded, status: v1.ConditionFalse, events: []string{string(ReasonRestartLimitExceeded)},
			waits: all(ReasonRestartLimitExceeded, "n1")},
		{name: "reached, not exceeded", ds: []dsOpt{limit("3"), withBudget("", "2")},
			setup:   func(ds *apps.DaemonSet, s *Snapshot) { replace(s, newPod(ds, "new-n1", "n1", withRestarts(0, 3))) },
			deletes: []string{"old-n2", "old-n3"}, reason: ReasonRollingOut, status: v1.ConditionTrue},
		{name: "restarts of older pods do not count", ds: []dsOpt{limit("3"), withBudget("", "1")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				replace(s, newPod(ds, "old-n2", "n2", old(), withRestarts(0, 50)))
			},
			deletes: []string{"old-n1"}},
		{name: "max-restarts 0: one restart fails, before any deadline", ds: []dsOpt{limit("0"), withAnnotations(AnnotationProgressDeadline, "1h"), rollingOutSince(time.Minute)},
			setup: waitingOnN1(time.Minute, withRestarts(0, 1)), marks: []string{failedMark},
			reason: ReasonRestartLimitExceeded, status: v1.ConditionFalse},
		{name: "exceeded with maxSurge: no more surge pods", ds: []dsOpt{limit("2"), withBudget("3", "0")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				s.Pods = append(s.Pods, newPod(ds, "new-n1", "n1", notReady(), withRestarts(0, 3)))
			},
			marks: []string{failedMark}, reason: ReasonRestartLimitExceeded, status: v1.ConditionFalse},
		{name: "on-failure rollback", ds: []dsOpt{limit("2"), withAnnotations(AnnotationOnFailure, "rollback")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) { replace(s, newPod(ds, "new-n1", "n1", withRestarts(0, 3))) },
			marks: []string{failedMark, "ds-old " + MarkRestored + "=3 from 2 at 2030-01-01T12:00:00Z"}, rollback: "ds-old", reason: ReasonRolledBack, status: v1.ConditionFalse,
			message: "revision 2 failed (PodRestartLimitExceeded: "},
		{name: "a released revision (once available everywhere) does not fail later", ds: []dsOpt{limit("2"), withAnnotations(AnnotationOnFailure, "rollback"), withBudget("", "5")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				updated(ds, s, "n1", "n2", "n3", "n4", "n5")
				replace(s, newPod(ds, "new-n1", "n1", notReady(), withRestarts(0, 9)))
				s.Revisions[1].Annotations = map[string]string{MarkAvailable: t0.Add(-time.Hour).Format(time.RFC3339)}
			},
			reason: ReasonNewRevisionAvailable, status: v1.ConditionTrue, waits: map[string]Reason{"n1": ReasonNewPodUnavailable}},
	})
}

func TestRolloutFailingContainer(t *testing.T) {
	limit := withAnnotations(AnnotationMaxRestarts, "5")
	failedMark := curRev + " " + MarkFailed + "=2 " + string(ReasonContainerFailing) + ": "
	onN1 := func(opts ...podOpt) func(*apps.DaemonSet, *Snapshot) {
		return func(ds *apps.DaemonSet, s *Snapshot) {
			replace(s, newPod(ds, "new-n1", "n1", append([]podOpt{notReady()}, opts...)...))
		}
	}
	var rows []rolloutRow
	for _, reason := range []string{"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError", "InvalidImageName"} {
		rows = append(rows, rolloutRow{name: reason + " fails at once", ds: []dsOpt{limit, withBudget("", "3")},
			setup:  onN1(waitingIn(reason, false)),
			marks:  []string{failedMark + "pod new-n1 on node n1: container c is waiting in " + reason + " (kubelet says " + reason + ")"},
			reason: ReasonContainerFailing, status: v1.ConditionFalse, events: []string{string(ReasonContainerFailing)},
			waits: with(all(ReasonContainerFailing, "n1"), "n1", string(ReasonNewPodUnavailable))})
	}
	rows = append(rows,
		rolloutRow{name: "an init container's failure counts", ds: []dsOpt{limit},
			setup: onN1(waitingIn("ErrImagePull", true)), marks: []string{failedMark + "pod new-n1 on node n1: container init is waiting in ErrImagePull"},
			reason: ReasonContainerFailing, status: v1.ConditionFalse},
		rolloutRow{name: "last terminated OOMKilled fails, though running again", ds: []dsOpt{limit},
			setup: onN1(lastTerminated("OOMKilled")), marks: []string{failedMark + "pod new-n1 on node n1: container c was last terminated OOMKilled"},
			reason: ReasonContainerFailing, status: v1.ConditionFalse},
		rolloutRow{name: "a container still being created is no failure", ds: []dsOpt{limit, withBudget("", "1")},
			setup: onN1(waitingIn("ContainerCreating", false)), reason: ReasonRollingOut, status: v1.ConditionTrue},
		rolloutRow{name: "last terminated Error is counted by restarts only", ds: []dsOpt{limit, withBudget("", "1")},
			setup: onN1(lastTerminated("Error")), reason: ReasonRollingOut, status: v1.ConditionTrue},
		rolloutRow{name: "without max-restarts a failing container only waits", ds: []dsOpt{withAnnotations(AnnotationProgressDeadline, "1h"), withBudget("", "1")},
			setup: onN1(waitingIn("ImagePullBackOff", false)), reason: ReasonRollingOut, status: v1.ConditionTrue, requeue: time.Hour},
		rolloutRow{name: "an older pod's failure does not count", ds: []dsOpt{limit, withBudget("", "1")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				replace(s, newPod(ds, "old-n2", "n2", old(), notReady(), waitingIn("CrashLoopBackOff", false)))
			},
			deletes: []string{"old-n2"}},
		rolloutRow{name: "restart limit and failing container at once: the limit is named", ds: []dsOpt{withAnnotations(AnnotationMaxRestarts, "0")},
			setup: onN1(lastTerminated("OOMKilled")), marks: []string{curRev + " " + MarkFailed + "=2 " + string(ReasonRestartLimitExceeded) + ": "},
			reason: ReasonRestartLimitExceeded, status: v1.ConditionFalse},
	)
	runRolloutRows(t, rows)
}

// A failed mark holds the rollout only while the revision keeps the number it
// failed under.
func TestRolloutFailedMark(t *testing.T) {
	watch := withAnnotations(AnnotationMaxRestarts, "3")
	marked := func(value string) func(*apps.DaemonSet, *Snapshot) {
		return func(_ *apps.DaemonSet, s *Snapshot) { annotate(s, curRev, MarkFailed, value) }
	}
	runRolloutRows(t, []rolloutRow{
		{name: "a mark at the revision's number holds every node", ds: []dsOpt{watch, withBudget("", "2")},
			setup:  marked("2 ProgressDeadlineExceeded: pod x never became available"),
			reason: ReasonProgressDeadlineExceeded, status: v1.ConditionFalse, message: "pod x never became available",
			waits: all(ReasonProgressDeadlineExceeded)},
		{name: "a mark holds with maxSurge", ds: []dsOpt{watch, withBudget("2", "0")},
			setup:  marked("2 PodRestartLimitExceeded: pod x restarted"),
			reason: ReasonRestartLimitExceeded, status: v1.ConditionFalse},
		{name: "a mark with on-failure rollback rolls back", ds: []dsOpt{watch, withAnnotations(AnnotationOnFailure, "rollback")},
			setup: marked("2 ProgressDeadlineExceeded: x"), rollback: "ds-old", reason: ReasonRolledBack, status: v1.ConditionFalse,
			marks: []string{"ds-old " + MarkRestored + "=3 from 2 at 2030-01-01T12:00:00Z"}},
		{name: "a mark does not stop a node that joins from getting a pod", ds: []dsOpt{watch},
			setup:   then(marked("2 ProgressDeadlineExceeded: x"), func(_ *apps.DaemonSet, s *Snapshot) { s.Nodes = append(s.Nodes, newNode("n6")) }),
			creates: []string{"n6"}},
		{name: "the template changed away and back: renumbered, the mark is stale and the rollout is retried", ds: []dsOpt{watch, withBudget("", "2")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				s.Revisions = []*apps.ControllerRevision{currentRevision(ds, 1), olderRevision(ds, "img:v0", "old", 2)}
				annotate(s, curRev, MarkFailed, "1 ProgressDeadlineExceeded: x")
			},
			deletes: []string{"old-n1", "old-n2"}, reason: ReasonRollingOut, status: v1.ConditionTrue},
		{name: "a mark of another number is stale", ds: []dsOpt{watch, withBudget("", "2")}, setup: marked("7 ProgressDeadlineExceeded: x"),
			deletes: []string{"old-n1", "old-n2"}},
		{name: "a malformed mark is ignored", ds: []dsOpt{watch, withBudget("", "2")}, setup: marked("failed"),
			deletes: []string{"old-n1", "old-n2"}},
		{name: "a mark on an older revision does not hold the current one", ds: []dsOpt{watch, withBudget("", "2")},
			setup: func(_ *apps.DaemonSet, s *Snapshot) {
				annotate(s, "ds-old", MarkFailed, "1 ProgressDeadlineExceeded: x")
			},
			deletes: []string{"old-n1", "old-n2"}},
		{name: "without rollout annotations the mark is not read", ds: []dsOpt{withBudget("", "2")}, setup: marked("2 ProgressDeadlineExceeded: x"),
			deletes: []string{"old-n1", "old-n2"}},
		{name: "an invalid annotation wins over the mark, and there is no rollback",
			ds:    []dsOpt{withAnnotations(AnnotationOnFailure, "rollback", AnnotationPaused, "maybe")},
			setup: marked("2 ProgressDeadlineExceeded: x"), reason: ReasonInvalidAnnotation, status: v1.ConditionFalse},
	})
}

func TestRollbackTarget(t *testing.T) {
	ds := newDS("ds")
	rev := func(hash string, number int64, kv ...string) *apps.ControllerRevision {
		r := olderRevision(ds, "img:"+hash, hash, number)
		r.Annotations = kvMap(kv)
		return r
	}
	available := []string{MarkAvailable, "2030-01-01T00:00:00Z"}
	failedAt := func(n string) []string { return []string{MarkFailed, n + " ProgressDeadlineExceeded: x"} }
	tests := []struct {
		name string
		old  []*apps.ControllerRevision
		want string // hash; "" for none
	}{
		{name: "no other revision"},
		{name: "none marked: the newest", old: []*apps.ControllerRevision{rev("a", 1), rev("b", 2)}, want: "b"},
		{name: "the newest once available everywhere, before newer unmarked ones",
			old: []*apps.ControllerRevision{rev("a", 1, available...), rev("b", 2), rev("c", 3)}, want: "a"},
		{name: "of the available ones, the newest",
			old: []*apps.ControllerRevision{rev("a", 1, available...), rev("b", 2, available...), rev("c", 3)}, want: "b"},
		{name: "failed ones are passed over", old: []*apps.ControllerRevision{rev("a", 1), rev("b", 2, failedAt("2")...)}, want: "a"},
		{name: "an available one that later failed is passed over",
			old: []*apps.ControllerRevision{rev("a", 1), rev("b", 2, append(available, failedAt("2")...)...)}, want: "a"},
		{name: "a stale failed mark does not count", old: []*apps.ControllerRevision{rev("a", 1), rev("b", 3, failedAt("2")...)}, want: "b"},
		{name: "every one failed: none", old: []*apps.ControllerRevision{rev("a", 1, failedAt("1")...), rev("b", 2, failedAt("2")...)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if r := rollbackTarget(tt.old); r != nil {
				got = r.Labels[HashLabel]
			}
			if got != tt.want {
				t.Errorf("rollbackTarget = %q, want %q", got, tt.want)
			}
		})
	}
}

// Through Decide: the rollback picks among the DaemonSet's revisions, and its Data
// restores the chosen template.
func TestRolloutRollbackTarget(t *testing.T) {
	three := func(ds *apps.DaemonSet, s *Snapshot) {
		s.Revisions = []*apps.ControllerRevision{olderRevision(ds, "img:a", "older", 1), olderRevision(ds, "img:v0", "old", 2), currentRevision(ds, 3)}
		annotate(s, curRev, MarkFailed, "3 PodRestartLimitExceeded: x")
	}
	rollback := []dsOpt{withAnnotations(AnnotationOnFailure, "rollback")}
	runRolloutRows(t, []rolloutRow{
		{name: "the newest revision once available everywhere", ds: rollback,
			setup:    then(three, func(_ *apps.DaemonSet, s *Snapshot) { annotate(s, "ds-older", MarkAvailable, "2029-12-01T00:00:00Z") }),
			rollback: "ds-older", reason: ReasonRolledBack, status: v1.ConditionFalse, message: "rolled back to the template of revision 1",
			marks: []string{"ds-older " + MarkRestored + "=4 from 3 at ", "ds-older " + MarkAvailable + "-"}},
		{name: "else the newest not marked failed", ds: rollback,
			setup: then(three, func(_ *apps.DaemonSet, s *Snapshot) {
				annotate(s, "ds-old", MarkFailed, "2 ProgressDeadlineExceeded: x")
			}),
			rollback: "ds-older", marks: []string{"ds-older " + MarkRestored + "=4 from 3 at "}},
		{name: "else the newest", ds: rollback, setup: three, rollback: "ds-old", message: "rolled back to the template of revision 2",
			reason: ReasonRolledBack, status: v1.ConditionFalse, marks: []string{"ds-old " + MarkRestored + "=4 from 3 at "}},
	})
	ds := newDS("ds", rollback...)
	s := policyCluster(ds)
	three(ds, s)
	p := Decide(s)
	if p.Rollback == nil {
		t.Fatal("no rollback")
	}
	if want := templatePatch(newDS("ds", withImage("img:v0"))); string(p.Rollback.Data.Raw) != string(want) {
		t.Errorf("rollback patch %s, want %s", p.Rollback.Data.Raw, want)
	}
}

func TestRolloutAvailableMark(t *testing.T) {
	watch := withAnnotations(AnnotationProgressDeadline, "10m")
	done := func(ds *apps.DaemonSet, s *Snapshot) { updated(ds, s, "n1", "n2", "n3", "n4", "n5") }
	runRolloutRows(t, []rolloutRow{
		{name: "available on every node: the revision is marked, the condition says so", ds: []dsOpt{watch}, setup: done,
			marks:  []string{curRev + " " + MarkAvailable + "=2030-01-01T12:00:00Z"},
			reason: ReasonNewRevisionAvailable, status: v1.ConditionTrue, message: "revision 2 is available on every node",
			events: []string{string(ReasonNewRevisionAvailable)}},
		{name: "already marked: not again", ds: []dsOpt{watch},
			setup:  then(done, func(_ *apps.DaemonSet, s *Snapshot) { annotate(s, curRev, MarkAvailable, "2029-01-01T00:00:00Z") }),
			reason: ReasonNewRevisionAvailable, status: v1.ConditionTrue},
		{name: "without rollout annotations: no mark", setup: done},
		{name: "one node still old: no mark", ds: []dsOpt{watch, withAnnotations(AnnotationPartition, "1")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) { updated(ds, s, "n1", "n2", "n3", "n4") }, reason: ReasonPartitionHeld, status: v1.ConditionTrue},
		{name: "one pod not available: no mark", ds: []dsOpt{watch},
			setup: then(done, waitingOnN1(time.Minute)), requeue: 10 * time.Minute,
			reason: ReasonRollingOut, status: v1.ConditionTrue},
		{name: "the revision is not saved yet: marked once it is", ds: []dsOpt{watch},
			setup:  then(done, func(_ *apps.DaemonSet, s *Snapshot) { s.Revisions = s.Revisions[:1] }),
			reason: ReasonNewRevisionAvailable, status: v1.ConditionTrue},
		{name: "a failed revision is not marked available", ds: []dsOpt{watch},
			setup:  then(done, func(_ *apps.DaemonSet, s *Snapshot) { annotate(s, curRev, MarkFailed, "2 PodRestartLimitExceeded: x") }),
			reason: ReasonRestartLimitExceeded, status: v1.ConditionFalse},
	})
}

func TestRolloutNewNodes(t *testing.T) {
	stable := withAnnotations(AnnotationNewNodes, "stable")
	paused := withAnnotations(AnnotationPaused, "true")
	join := func(name string, kv ...string) func(*apps.DaemonSet, *Snapshot) {
		return func(_ *apps.DaemonSet, s *Snapshot) { s.Nodes = append(s.Nodes, newNode(name, withLabels(kv...))) }
	}
	runRolloutRows(t, []rolloutRow{
		{name: "stable, paused: a node that joins gets the stable revision", ds: []dsOpt{stable, paused},
			setup: join("n6"), creates: []string{"n6"}, stable: map[string]string{"n6": "old"}},
		{name: "stable, paused, with maxSurge", ds: []dsOpt{stable, paused, withBudget("2", "0")},
			setup: join("n6"), creates: []string{"n6"}, stable: map[string]string{"n6": "old"}},
		{name: "update, paused: the current revision", ds: []dsOpt{withAnnotations(AnnotationNewNodes, "update"), paused},
			setup: join("n6"), creates: []string{"n6"}},
		{name: "stable with canary: a node that is no canary gets the stable revision", ds: []dsOpt{stable, withAnnotations(AnnotationCanary, "canary=true")},
			setup: join("n6"), creates: []string{"n6"}, stable: map[string]string{"n6": "old"}},
		{name: "stable with canary: a canary node gets the current revision", ds: []dsOpt{stable, withAnnotations(AnnotationCanary, "canary=true")},
			setup: join("n6", "canary", "true"), creates: []string{"n6"}},
		{name: "stable with waves: a node of a later wave gets the stable revision", ds: []dsOpt{stable, withAnnotations(AnnotationWaves, "zone")},
			setup:   then(func(_ *apps.DaemonSet, s *Snapshot) { zones(s) }, join("n6", "zone", "b"), join("n7", "zone", "a")),
			creates: []string{"n6", "n7"}, stable: map[string]string{"n6": "old"}},
		{name: "stable: a node whose old pod the rollout deleted gets the current revision", ds: []dsOpt{stable, withBudget("", "1")},
			setup: func(_ *apps.DaemonSet, s *Snapshot) {
				s.Pods = slices.DeleteFunc(s.Pods, func(p *v1.Pod) bool { return p.Name == "old-n1" })
			},
			creates: []string{"n1"}},
		{name: "stable: once the rollout failed, an emptied node gets the stable revision back", ds: []dsOpt{stable, withAnnotations(AnnotationMaxRestarts, "1")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				s.Pods = slices.DeleteFunc(s.Pods, func(p *v1.Pod) bool { return p.Name == "old-n1" })
				replace(s, newPod(ds, "new-n2", "n2", withRestarts(0, 5)))
			},
			creates: []string{"n1"}, stable: map[string]string{"n1": "old"}},
		{name: "stable: no pod on an older revision, the current one", ds: []dsOpt{stable, paused},
			setup:   then(func(ds *apps.DaemonSet, s *Snapshot) { updated(ds, s, "n1", "n2", "n3", "n4", "n5") }, join("n6")),
			creates: []string{"n6"}},
		{name: "stable: the newest older revision some pod still runs", ds: []dsOpt{stable, paused},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				s.Revisions = []*apps.ControllerRevision{olderRevision(ds, "img:a", "older", 1), olderRevision(ds, "img:v0", "old", 2), currentRevision(ds, 3)}
				replace(s, newPod(ds, "older-n1", "n1", withHash("older")))
				join("n6")(ds, s)
			},
			creates: []string{"n6"}, stable: map[string]string{"n6": "old"}},
		{name: "stable: an older revision no pod runs is skipped", ds: []dsOpt{stable, paused},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				s.Revisions = []*apps.ControllerRevision{olderRevision(ds, "img:a", "older", 1), olderRevision(ds, "img:v0", "old", 2), currentRevision(ds, 3)}
				updated(ds, s, "n2", "n3", "n4", "n5")
				replace(s, newPod(ds, "older-n1", "n1", withHash("older")))
				join("n6")(ds, s)
			},
			creates: []string{"n6"}, stable: map[string]string{"n6": "older"}},
		{name: "stable with OnDelete: rollout annotations do not apply", ds: []dsOpt{stable, paused, withOnDelete()},
			setup: join("n6"), creates: []string{"n6"}},
	})
}

// The stable template is the older revision's, made ready for pods the way the current
// one is, without the DaemonSet's template generation: its pods must not pass for
// current ones.
func TestRolloutStableTemplate(t *testing.T) {
	ds := newDS("ds", withAnnotations(AnnotationNewNodes, "stable", AnnotationPaused, "true", TemplateGenerationAnnotation, "7"))
	s := policyCluster(ds)
	s.Nodes = append(s.Nodes, newNode("n6"))
	p := Decide(s)
	if len(p.Creates) != 1 || p.Creates[0].Template == nil {
		t.Fatalf("creates %+v, want one from the stable template", p.Creates)
	}
	tmpl := p.Creates[0].Template
	if img := tmpl.Spec.Containers[0].Image; img != "img:v0" {
		t.Errorf("stable template runs %s, want img:v0", img)
	}
	if tmpl.Labels[HashLabel] != "old" || tmpl.Labels["app"] != "ds" {
		t.Errorf("stable template labels %v", tmpl.Labels)
	}
	if _, ok := tmpl.Labels[TemplateGenerationLabel]; ok {
		t.Errorf("stable template carries the template generation: %v", tmpl.Labels)
	}
	if p.Template.Labels[TemplateGenerationLabel] != "7" {
		t.Errorf("current template labels %v, want generation 7", p.Template.Labels)
	}
	if len(tmpl.Spec.Tolerations) == 0 {
		t.Error("stable template without the daemon tolerations")
	}
	if pod := PodForNode(ds, tmpl, "n6"); pod.Labels[HashLabel] != "old" || pod.Spec.Containers[0].Image != "img:v0" {
		t.Errorf("pod from the stable template: %v %s", pod.Labels, pod.Spec.Containers[0].Image)
	}
}
