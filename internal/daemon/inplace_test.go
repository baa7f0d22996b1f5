package daemon

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func TestInPlaceDiff(t *testing.T) {
	base := func() *v1.PodTemplateSpec {
		return &v1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "a"}},
			Spec: v1.PodSpec{
				InitContainers: []v1.Container{{Name: "setup", Image: "setup:v1"}, {Name: "proxy", Image: "proxy:v1", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)}},
				Containers:     []v1.Container{{Name: "app", Image: "app:v1"}, {Name: "log", Image: "log:v1"}},
				Tolerations:    []v1.Toleration{{Key: "a", Operator: v1.TolerationOpExists}},
			},
		}
	}
	// burstable gives the app container requests, with an ephemeral-storage one.
	burstable := func(t *v1.PodTemplateSpec) {
		t.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceEphemeralStorage: resource.MustParse("1Gi")}
	}
	tests := []struct {
		name           string
		from           func(*v1.PodTemplateSpec) // applied to both templates first
		change         func(*v1.PodTemplateSpec)
		ok             bool
		images, inits  map[string]string
		addTolerations []string
		resized        []string
	}{
		{name: "an app container's image: in place", change: func(t *v1.PodTemplateSpec) { t.Spec.Containers[1].Image = "log:v2" },
			ok: true, images: map[string]string{"log": "log:v2"}},
		{name: "init container and sidecar images: in place", change: func(t *v1.PodTemplateSpec) {
			t.Spec.InitContainers[0].Image, t.Spec.InitContainers[1].Image = "setup:v2", "proxy:v2"
		}, ok: true, inits: map[string]string{"setup": "setup:v2", "proxy": "proxy:v2"}},
		{name: "a toleration added: in place", change: func(t *v1.PodTemplateSpec) {
			t.Spec.Tolerations = append(t.Spec.Tolerations, v1.Toleration{Key: "b", Operator: v1.TolerationOpExists})
		}, ok: true, addTolerations: []string{"b"}},
		{name: "an image and a toleration: in place", change: func(t *v1.PodTemplateSpec) {
			t.Spec.Containers[0].Image = "app:v2"
			t.Spec.Tolerations = append([]v1.Toleration{{Key: "b", Operator: v1.TolerationOpExists}}, t.Spec.Tolerations...)
		}, ok: true, images: map[string]string{"app": "app:v2"}, addTolerations: []string{"b"}},
		{name: "nothing differs: nothing to do in place", change: func(*v1.PodTemplateSpec) {}},
		{name: "a toleration removed: replaced", change: func(t *v1.PodTemplateSpec) { t.Spec.Tolerations = nil }},
		{name: "a toleration changed: replaced", change: func(t *v1.PodTemplateSpec) { t.Spec.Tolerations[0].Effect = v1.TaintEffectNoSchedule }},
		{name: "an image and an env var: replaced", change: func(t *v1.PodTemplateSpec) {
			t.Spec.Containers[0].Image = "app:v2"
			t.Spec.Containers[0].Env = []v1.EnvVar{{Name: "X", Value: "1"}}
		}},
		{name: "resources that change the QoS class (BestEffort to Burstable): replaced", change: func(t *v1.PodTemplateSpec) {
			t.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}
		}},
		{name: "CPU and memory within the QoS class: resized in place", from: burstable, change: func(t *v1.PodTemplateSpec) {
			t.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi")}
		}, ok: true, resized: []string{"app"}},
		{name: "a resize and an image: in place", from: burstable, change: func(t *v1.PodTemplateSpec) {
			t.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m"), v1.ResourceEphemeralStorage: resource.MustParse("1Gi")}
			t.Spec.Containers[1].Image = "log:v2"
		}, ok: true, images: map[string]string{"log": "log:v2"}, resized: []string{"app"}},
		{name: "a resource other than CPU and memory: replaced", from: burstable, change: func(t *v1.PodTemplateSpec) {
			t.Spec.Containers[0].Resources.Requests[v1.ResourceEphemeralStorage] = resource.MustParse("2Gi")
		}},
		{name: "an init container's resources: replaced", from: burstable, change: func(t *v1.PodTemplateSpec) {
			t.Spec.InitContainers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
		}},
		{name: "a container added: replaced", change: func(t *v1.PodTemplateSpec) {
			t.Spec.Containers = append(t.Spec.Containers, v1.Container{Name: "more", Image: "more:v1"})
		}},
		{name: "containers reordered: replaced", change: func(t *v1.PodTemplateSpec) {
			t.Spec.Containers[0], t.Spec.Containers[1] = t.Spec.Containers[1], t.Spec.Containers[0]
		}},
		{name: "a container renamed with a new image: replaced", change: func(t *v1.PodTemplateSpec) {
			t.Spec.Containers[0].Name, t.Spec.Containers[0].Image = "app2", "app:v2"
		}},
		{name: "a template annotation (kubectl rollout restart): replaced", change: func(t *v1.PodTemplateSpec) {
			t.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "2030-01-01T00:00:00Z"}
		}},
		{name: "a template label: replaced", change: func(t *v1.PodTemplateSpec) { t.Labels["tier"] = "x" }},
		{name: "the node selector: replaced", change: func(t *v1.PodTemplateSpec) { t.Spec.NodeSelector = map[string]string{"a": "b"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from, to := base(), base()
			if tt.from != nil {
				tt.from(from)
				tt.from(to)
			}
			tt.change(to)
			before := from.DeepCopy()
			ch, ok := inPlaceDiff(from, to)
			if ok != tt.ok {
				t.Fatalf("in place = %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			if !maps.Equal(ch.images, tt.images) || !maps.Equal(ch.initImages, tt.inits) {
				t.Errorf("images %v, init images %v; want %v, %v", ch.images, ch.initImages, tt.images, tt.inits)
			}
			var added []string
			for _, tol := range ch.addTolerations {
				added = append(added, tol.Key)
			}
			if !slices.Equal(added, tt.addTolerations) {
				t.Errorf("tolerations added %v, want %v", added, tt.addTolerations)
			}
			if got := slices.Sorted(maps.Keys(ch.resources)); !slices.Equal(got, tt.resized) {
				t.Errorf("resized %v, want %v", got, tt.resized)
			}
			for name, r := range ch.resources {
				if i := slices.IndexFunc(to.Spec.Containers, func(c v1.Container) bool { return c.Name == name }); !sameResources(r, to.Spec.Containers[i].Resources) {
					t.Errorf("%s resized to %v, want the new template's %v", name, r, to.Spec.Containers[i].Resources)
				}
			}
			if !equalTemplates(from, before) {
				t.Errorf("inPlaceDiff changed its input")
			}
		})
	}
}

func equalTemplates(a, b *v1.PodTemplateSpec) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// inPlaced is node's old pod as an in-place update to ds's current revision left
// it, a minute ago: the container c had restarted restarts times before the patch;
// now it has restarted now times and runs (when running), Ready since readyAt.
func inPlaced(ds *apps.DaemonSet, node string, before, now int32, running bool, readyAt time.Time) *v1.Pod {
	pod := newPod(ds, "old-"+node, node, readySince(readyAt))
	rec := inPlaceRecord{Revision: hashOf(ds), At: t0.Add(-time.Minute), Restarts: map[string]int32{"c": before}, Restarting: []string{"c"},
		Images: map[string]string{"c": ds.Spec.Template.Spec.Containers[0].Image}}
	raw, _ := json.Marshal(rec)
	pod.Annotations = map[string]string{AnnotationInPlaceUpdate: string(raw)}
	cs := v1.ContainerStatus{Name: "c", RestartCount: now}
	if running {
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(readyAt)}
	}
	pod.Status.ContainerStatuses = []v1.ContainerStatus{cs}
	return pod
}

func TestRolloutInPlace(t *testing.T) {
	inPlace := withAnnotations(AnnotationInPlace, "true")
	withEnv := func(_ *apps.DaemonSet, s *Snapshot) {
		older := newDS("ds", withImage("img:v0"))
		older.Spec.Template.Spec.Containers[0].Env = []v1.EnvVar{{Name: "MODE", Value: "old"}}
		s.Revisions[0] = revision(older, "ds-old", "old", 1, templatePatch(older))
	}
	runRolloutRows(t, []rolloutRow{
		{name: "an image change: old pods updated in place, within maxUnavailable", ds: []dsOpt{inPlace, withBudget("", "2")},
			updates: []string{"old-n1", "old-n2"}, reason: ReasonRollingOut, status: v1.ConditionTrue,
			waits: all(ReasonBudgetFull, "n1", "n2")},
		{name: "without the annotation: replaced", ds: []dsOpt{withBudget("", "2")},
			deletes: []string{"old-n1", "old-n2"}},
		{name: "in-place false: replaced", ds: []dsOpt{withAnnotations(AnnotationInPlace, "false"), withBudget("", "1")},
			deletes: []string{"old-n1"}, reason: ReasonRollingOut, status: v1.ConditionTrue, waits: all(ReasonBudgetFull, "n1")},
		{name: "a mixed change (image and env): replaced", ds: []dsOpt{inPlace, withBudget("", "1")}, setup: withEnv,
			deletes: []string{"old-n1"}, reason: ReasonRollingOut, status: v1.ConditionTrue, waits: all(ReasonBudgetFull, "n1")},
		{name: "the old pod's revision is gone: replaced", ds: []dsOpt{inPlace, withBudget("", "1")},
			setup:   func(_ *apps.DaemonSet, s *Snapshot) { s.Revisions = s.Revisions[1:] },
			deletes: []string{"old-n1"}, reason: ReasonRollingOut, status: v1.ConditionTrue, waits: all(ReasonBudgetFull, "n1")},
		{name: "a pod patched but not restarted yet counts unavailable", ds: []dsOpt{inPlace, withBudget("", "1")},
			setup:  func(ds *apps.DaemonSet, s *Snapshot) { replace(s, inPlaced(ds, "n1", 0, 0, true, t0.Add(-time.Hour))) },
			reason: ReasonRollingOut, status: v1.ConditionTrue,
			waits: with(all(ReasonBudgetFull, "n1"), "n1", string(ReasonInPlaceUpdating))},
		{name: "a pod whose new container waits to be pulled counts unavailable", ds: []dsOpt{inPlace, withBudget("", "1")},
			setup:  func(ds *apps.DaemonSet, s *Snapshot) { replace(s, inPlaced(ds, "n1", 2, 2, false, t0.Add(-time.Hour))) },
			reason: ReasonRollingOut, status: v1.ConditionTrue,
			waits: with(all(ReasonBudgetFull, "n1"), "n1", string(ReasonInPlaceUpdating))},
		{name: "restarted but not Ready again: unavailable", ds: []dsOpt{inPlace, withBudget("", "1")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				p := inPlaced(ds, "n1", 0, 1, true, t0.Add(-time.Second))
				notReady()(p)
				replace(s, p)
			},
			reason: ReasonRollingOut, status: v1.ConditionTrue,
			waits: with(all(ReasonBudgetFull, "n1"), "n1", string(ReasonNewPodUnavailable))},
		{name: "restarted and Ready again: the next node is updated", ds: []dsOpt{inPlace, withBudget("", "1")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				replace(s, inPlaced(ds, "n1", 3, 4, true, t0.Add(-time.Second)))
			},
			updates: []string{"old-n2"}, reason: ReasonRollingOut, status: v1.ConditionTrue,
			waits: all(ReasonBudgetFull, "n1", "n2")},
		{name: "restarted, Ready, but not past the bake: waits for it", ds: []dsOpt{inPlace, withBudget("", "1"), withAnnotations(AnnotationMinHealthy, "30s")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				replace(s, inPlaced(ds, "n1", 0, 1, true, t0.Add(-10*time.Second)))
			},
			reason: ReasonRollingOut, status: v1.ConditionTrue, requeue: 20*time.Second + time.Millisecond,
			waits: with(all(ReasonBudgetFull, "n1"), "n1", string(ReasonNewPodBaking))},
		{name: "an unavailable old pod is updated first", ds: []dsOpt{inPlace, withBudget("", "1")},
			setup:   func(ds *apps.DaemonSet, s *Snapshot) { replace(s, newPod(ds, "old-n3", "n3", old(), notReady())) },
			updates: []string{"old-n3"}, reason: ReasonRollingOut, status: v1.ConditionTrue,
			waits: all(ReasonBudgetFull, "n3")},
		{name: "paused: nothing is updated in place", ds: []dsOpt{inPlace, withAnnotations(AnnotationPaused, "true"), withBudget("", "5")},
			reason: ReasonPaused, status: v1.ConditionUnknown, waits: all(ReasonPaused)},
		{name: "partition: held nodes are not patched", ds: []dsOpt{inPlace, withAnnotations(AnnotationPartition, "3"), withBudget("", "5")},
			updates: []string{"old-n1", "old-n2"}, reason: ReasonRollingOut, status: v1.ConditionTrue,
			waits: map[string]Reason{"n3": ReasonPartitionHeld, "n4": ReasonPartitionHeld, "n5": ReasonPartitionHeld}},
		{name: "in place with maxSurge: the rollout holds and says why", ds: []dsOpt{inPlace, withBudget("1", "0")},
			reason: ReasonInvalidAnnotation, status: v1.ConditionFalse, message: "needs maxSurge 0", waits: all(ReasonInvalidAnnotation)},
		{name: "in-place value that does not parse: the rollout holds", ds: []dsOpt{withAnnotations(AnnotationInPlace, "yes please"), withBudget("", "1")},
			reason: ReasonInvalidAnnotation, status: v1.ConditionFalse, message: AnnotationInPlace, waits: all(ReasonInvalidAnnotation)},
	})
}

func TestInPlaceRestartsAndDeadline(t *testing.T) {
	inPlace := withAnnotations(AnnotationInPlace, "true")
	runRolloutRows(t, []rolloutRow{
		{name: "restarts before the update and the update's own do not count against max-restarts",
			ds: []dsOpt{inPlace, withAnnotations(AnnotationMaxRestarts, "0", AnnotationMinHealthy, "0s"), withBudget("", "1")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				replace(s, inPlaced(ds, "n1", 5, 6, true, t0.Add(-time.Second)))
			},
			updates: []string{"old-n2"}, reason: ReasonRollingOut, status: v1.ConditionTrue},
		{name: "a restart after the update's counts",
			ds: []dsOpt{inPlace, withAnnotations(AnnotationMaxRestarts, "0", AnnotationMinHealthy, "0s"), withBudget("", "1")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				replace(s, inPlaced(ds, "n1", 5, 7, true, t0.Add(-time.Second)))
			},
			marks:  []string{curRev + " " + MarkFailed + "=2 " + string(ReasonRestartLimitExceeded) + ": pod old-n1 on node n1 restarted 1 times"},
			reason: ReasonRestartLimitExceeded, status: v1.ConditionFalse, events: []string{string(ReasonRestartLimitExceeded)}},
		{name: "the new image cannot be pulled: the rollout fails",
			ds: []dsOpt{inPlace, withAnnotations(AnnotationMaxRestarts, "2"), withBudget("", "1")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				p := inPlaced(ds, "n1", 0, 0, false, t0.Add(-time.Hour))
				p.Status.ContainerStatuses[0].Image = "img:v1"
				p.Status.ContainerStatuses[0].State.Waiting = &v1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}
				replace(s, p)
			},
			marks:  []string{curRev + " " + MarkFailed + "=2 " + string(ReasonContainerFailing)},
			reason: ReasonContainerFailing, status: v1.ConditionFalse, events: []string{string(ReasonContainerFailing)}},
		{name: "the old image's failure, before the kubelet acted on the update, is not the release's",
			ds: []dsOpt{inPlace, withAnnotations(AnnotationMaxRestarts, "2"), withBudget("", "1")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				p := inPlaced(ds, "n1", 0, 0, false, t0.Add(-time.Hour))
				p.Status.ContainerStatuses[0].Image = "img:v0"
				p.Status.ContainerStatuses[0].State.Waiting = &v1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}
				replace(s, p)
			},
			reason: ReasonRollingOut, status: v1.ConditionTrue,
			waits: with(all(ReasonBudgetFull, "n1"), "n1", string(ReasonInPlaceUpdating))},
		{name: "the progress deadline runs from the update, not the pod's creation",
			ds:     []dsOpt{inPlace, withAnnotations(AnnotationProgressDeadline, "5m"), withBudget("", "1"), withProgressing(ReasonRollingOut, v1.ConditionTrue, t0.Add(-2*time.Hour))},
			setup:  func(ds *apps.DaemonSet, s *Snapshot) { replace(s, inPlaced(ds, "n1", 0, 0, true, t0.Add(-time.Hour))) },
			reason: ReasonRollingOut, status: v1.ConditionTrue, requeue: 4 * time.Minute,
			waits: with(all(ReasonBudgetFull, "n1"), "n1", string(ReasonInPlaceUpdating))},
	})
}

func TestInPlaceUpdatePatch(t *testing.T) {
	ds := newDS("ds", withAnnotations(AnnotationInPlace, "true", TemplateGenerationAnnotation, "7"), withBudget("", "1"))
	ds.Spec.Template.Spec.Tolerations = []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpExists}}
	s := policyCluster(ds)
	s.Revisions[0] = olderRevision(newDS("ds", withAnnotations(AnnotationInPlace, "true")), "img:v0", "old", 1) // no toleration yet
	p := newPod(ds, "old-n1", "n1", old())
	p.Status.InitContainerStatuses = []v1.ContainerStatus{{Name: "init", RestartCount: 1}}
	p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", RestartCount: 4}}
	replace(s, p)
	plan := Decide(s)
	if len(plan.Updates) != 1 || len(plan.Deletes) != 0 {
		t.Fatalf("updates %v, deletes %v; want old-n1 updated in place", updatedNames(plan), deletedNames(plan))
	}
	u := plan.Updates[0]
	if u.Pod != p || u.Reason != ReasonInPlaceUpdate {
		t.Errorf("update of %s for %s, want old-n1 for %s", u.Pod.Name, u.Reason, ReasonInPlaceUpdate)
	}
	if want := map[string]string{"c": "img:v1"}; !maps.Equal(u.Images, want) || len(u.InitImages) != 0 {
		t.Errorf("images %v, init images %v; want %v", u.Images, u.InitImages, want)
	}
	if len(u.AddTolerations) != 1 || u.AddTolerations[0].Key != "dedicated" {
		t.Errorf("tolerations added %v, want dedicated", u.AddTolerations)
	}
	if want := map[string]string{HashLabel: hashOf(ds), TemplateGenerationLabel: "7"}; !maps.Equal(u.Labels, want) {
		t.Errorf("labels %v, want %v", u.Labels, want)
	}
	var rec inPlaceRecord
	if err := json.Unmarshal([]byte(u.Annotations[AnnotationInPlaceUpdate]), &rec); err != nil {
		t.Fatalf("record %q: %v", u.Annotations[AnnotationInPlaceUpdate], err)
	}
	want := inPlaceRecord{Revision: hashOf(ds), At: t0, Restarts: map[string]int32{"init": 1, "c": 4}, Restarting: []string{"c"}, Images: map[string]string{"c": "img:v1"}}
	if rec.Revision != want.Revision || !rec.At.Equal(want.At) || !maps.Equal(rec.Restarts, want.Restarts) ||
		!slices.Equal(rec.Restarting, want.Restarting) || !maps.Equal(rec.Images, want.Images) {
		t.Errorf("record %+v, want %+v", rec, want)
	}
	if plan.Writes() < 1 {
		t.Errorf("Writes() = %d does not count the update", plan.Writes())
	}
}

func TestInPlaceWaitsForItsWriteToBeSeen(t *testing.T) {
	ds := newDS("ds", withAnnotations(AnnotationInPlace, "true"), withBudget("", "2"))
	s := policyCluster(ds)
	s.InFlight = InFlight{Updates: map[types.UID]bool{"uid-old-n1": true}}
	if p := Decide(s); len(p.Updates)+len(p.Deletes) != 0 {
		t.Errorf("with an in-place update not seen yet: updates %v, deletes %v; want none", updatedNames(p), deletedNames(p))
	}
}

func TestSlimPodKeepsTheInPlaceRecord(t *testing.T) {
	ds := newDS("ds")
	pod := inPlaced(ds, "n1", 0, 1, true, t0)
	slim := SlimPod(pod)
	if slim.Annotations[AnnotationInPlaceUpdate] != pod.Annotations[AnnotationInPlaceUpdate] {
		t.Errorf("slim pod annotations %v, want the in-place record kept", slim.Annotations)
	}
	if inPlacePending(slim) != inPlacePending(pod) || podRestarts(slim) != podRestarts(pod) {
		t.Errorf("slim pod reads differently from the whole one")
	}
}

func TestInPlaceRefusedIsReplaced(t *testing.T) {
	ds := newDS("ds", withAnnotations(AnnotationInPlace, "true"), withBudget("", "1"))
	s := policyCluster(ds)
	s.InPlaceRefused = map[types.UID]bool{"uid-old-n1": true}
	p := Decide(s)
	if !slices.Equal(deletedNames(p), []string{"old-n1"}) || len(p.Updates) != 0 {
		t.Errorf("deletes %v, updates %v; want old-n1 replaced, since its in-place update was rejected", deletedNames(p), updatedNames(p))
	}
}

func TestInPlaceResizeIsPendingUntilReported(t *testing.T) {
	ds := newDS("ds")
	want := v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m")}}
	pod := newPod(ds, "p", "n1")
	raw, _ := json.Marshal(inPlaceRecord{Revision: hashOf(ds), At: t0, Resized: map[string]v1.ResourceRequirements{"c": want}})
	pod.Annotations = map[string]string{AnnotationInPlaceUpdate: string(raw)}
	pod.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}},
		Resources: &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}}}}
	if !inPlacePending(pod) || !inPlacePending(SlimPod(pod)) {
		t.Errorf("a pod whose status still reports the old CPU is not pending")
	}
	pod.Status.ContainerStatuses[0].Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("0.2")}}
	if inPlacePending(pod) || inPlacePending(SlimPod(pod)) {
		t.Errorf("a pod whose status reports the new CPU is still pending")
	}
}

// inPlacePending and podRestarts ask of one pod as a decision's update stage does.
func inPlacePending(pod *v1.Pod) bool { return (&updater{}).inPlacePending(pod) }
func podRestarts(pod *v1.Pod) int32   { return (&updater{}).podRestarts(pod) }

// resizedInPlace is node's pod updated in place to ds's revision by a resize its
// status does not report yet, and which the kubelet holds back for reason.
func resizedInPlace(ds *apps.DaemonSet, node, reason string) *v1.Pod {
	pod := newPod(ds, "old-"+node, node, readySince(t0.Add(-time.Hour)))
	want := v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}}
	raw, _ := json.Marshal(inPlaceRecord{Revision: hashOf(ds), At: t0.Add(-time.Minute), Resized: map[string]v1.ResourceRequirements{"c": want}})
	pod.Annotations = map[string]string{AnnotationInPlaceUpdate: string(raw)}
	pod.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(t0.Add(-time.Hour))}},
		Resources: &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}}}}
	if reason != "" {
		pod.Status.Conditions = append(pod.Status.Conditions, v1.PodCondition{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: reason,
			Message: "Node didn't have enough resource: cpu, requested: 2000, used: 1500, capacity: 2000"})
	}
	return pod
}

func TestInPlaceResizeHeldBackByTheKubelet(t *testing.T) {
	inPlace := withAnnotations(AnnotationInPlace, "true")
	runRolloutRows(t, []rolloutRow{
		{name: "a resize the kubelet has not acted on: the node waits for the update",
			ds:     []dsOpt{inPlace, withBudget("", "1")},
			setup:  func(ds *apps.DaemonSet, s *Snapshot) { replace(s, resizedInPlace(ds, "n1", "")) },
			reason: ReasonRollingOut, status: v1.ConditionTrue,
			waits: with(all(ReasonBudgetFull, "n1"), "n1", string(ReasonInPlaceUpdating))},
		{name: "a resize the kubelet defers: the node says so",
			ds:     []dsOpt{inPlace, withAnnotations(AnnotationMaxRestarts, "2"), withBudget("", "1")},
			setup:  func(ds *apps.DaemonSet, s *Snapshot) { replace(s, resizedInPlace(ds, "n1", v1.PodReasonDeferred)) },
			reason: ReasonRollingOut, status: v1.ConditionTrue,
			waits: with(all(ReasonBudgetFull, "n1"), "n1", string(ReasonResizePending))},
		{name: "an infeasible resize, without failure rules: the node says so",
			ds:     []dsOpt{inPlace, withBudget("", "1")},
			setup:  func(ds *apps.DaemonSet, s *Snapshot) { replace(s, resizedInPlace(ds, "n1", v1.PodReasonInfeasible)) },
			reason: ReasonRollingOut, status: v1.ConditionTrue,
			waits: with(all(ReasonBudgetFull, "n1"), "n1", string(ReasonResizePending))},
		{name: "an infeasible resize under max-restarts fails the rollout",
			ds:     []dsOpt{inPlace, withAnnotations(AnnotationMaxRestarts, "2"), withBudget("", "1")},
			setup:  func(ds *apps.DaemonSet, s *Snapshot) { replace(s, resizedInPlace(ds, "n1", v1.PodReasonInfeasible)) },
			marks:  []string{curRev + " " + MarkFailed + "=2 " + string(ReasonContainerFailing) + ": pod old-n1 on node n1: its resize is infeasible (Node didn't have enough resource"},
			reason: ReasonContainerFailing, status: v1.ConditionFalse, events: []string{string(ReasonContainerFailing)}},
	})
}

func TestSlimPodKeepsTheResizeCondition(t *testing.T) {
	ds := newDS("ds")
	pod := resizedInPlace(ds, "n1", v1.PodReasonInfeasible)
	if got, want := resizeFailure(SlimPod(pod)), resizeFailure(pod); got == "" || got != want {
		t.Fatalf("the slim pod's resize failure is %q, want %q", got, want)
	}
}
