package rolloutplan

import (
	"fmt"
	"maps"
	"slices"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/everynode/everynode/internal/daemon"
	"github.com/everynode/everynode/internal/gather"
)

// world is the simulated cluster the planner plays the rollout on: its own copies of
// the DaemonSet, its pods and revisions, changed only by the Plans the core returns
// and by the simulated kubelet (every pod Ready podStart after it is created).
// Writes are seen at once: there is no cache lag and nothing is ever in flight.
type world struct {
	ds       *apps.DaemonSet
	nodes    []*v1.Node
	pods     map[string]*v1.Pod // by name
	readyAt  map[string]time.Time
	revs     []*apps.ControllerRevision
	elig     *daemon.Eligibility
	now      time.Time
	podStart time.Duration
	serial   int
}

// newWorld copies what it is given, so that nothing the caller holds is changed.
// Pods being deleted are taken as gone; pods that are not Ready yet start now.
func newWorld(in Input, now time.Time, podStart time.Duration) *world {
	w := &world{ds: in.DaemonSet.DeepCopy(), pods: map[string]*v1.Pod{}, readyAt: map[string]time.Time{},
		now: now, podStart: podStart}
	for _, n := range in.Nodes {
		w.nodes = append(w.nodes, n.DeepCopy())
	}
	for _, r := range in.Revisions {
		w.revs = append(w.revs, r.DeepCopy())
	}
	for _, pod := range in.Pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		pod = pod.DeepCopy()
		w.pods[pod.Name] = pod
		if !daemon.IsReady(pod) && pod.Status.Phase != v1.PodFailed && pod.Status.Phase != v1.PodSucceeded {
			w.start(pod)
		}
	}
	w.elig = daemon.NewEligibility(&w.ds.Spec.Template.Spec)
	return w
}

// snapshot is what the core sees at the world's time.
func (w *world) snapshot() *daemon.Snapshot {
	objs := gather.Objects{Nodes: w.nodes, Revisions: w.revs}
	for _, name := range w.podNames() {
		objs.Pods = append(objs.Pods, w.pods[name])
	}
	return gather.Snapshot(w.ds, objs, w.now, gather.Controller{Eligibility: w.elig})
}

func (w *world) podNames() []string {
	names := make([]string, 0, len(w.pods))
	for name := range w.pods {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// apply carries a Plan out on the world, as the controller's applier would, all of it
// succeeding.
func (w *world) apply(p daemon.Plan) {
	for _, pod := range p.Adopt {
		w.setPod(pod.Name, func(x *v1.Pod) {
			x.OwnerReferences = append(withoutController(x.OwnerReferences), *daemon.ControllerRef(w.ds))
		})
	}
	for _, pod := range p.Release {
		w.setPod(pod.Name, func(x *v1.Pod) { x.OwnerReferences = withoutController(x.OwnerReferences) })
	}
	for _, r := range p.AdoptRevisions {
		w.setRevision(r.Name, func(x *apps.ControllerRevision) {
			x.OwnerReferences = append(withoutController(x.OwnerReferences), *daemon.ControllerRef(w.ds))
		})
	}
	for _, r := range p.ReleaseRevisions {
		w.setRevision(r.Name, func(x *apps.ControllerRevision) { x.OwnerReferences = withoutController(x.OwnerReferences) })
	}
	for _, r := range p.LabelRevisions {
		w.replaceRevision(r)
	}
	if r := p.CreateRevision; r != nil {
		r = r.DeepCopy()
		r.UID = types.UID("plan-" + r.Name)
		r.CreationTimestamp = metav1.NewTime(w.now)
		w.revs = append(w.revs, r)
	}
	if r := p.RenumberRevision; r != nil {
		w.replaceRevision(r)
	}
	for _, pod := range p.Relabel {
		w.setPod(pod.Name, func(x *v1.Pod) { x.Labels[daemon.HashLabel] = p.Hash })
	}
	for _, r := range p.DedupRevisions {
		w.deleteRevision(r.Name)
	}
	for _, d := range p.Deletes {
		delete(w.pods, d.Pod.Name)
		delete(w.readyAt, d.Pod.Name)
	}
	for _, u := range p.Updates {
		w.setPod(u.Pod.Name, func(x *v1.Pod) { w.updateInPlace(x, u) })
	}
	for _, c := range p.Creates {
		template := p.Template
		if c.Template != nil {
			template = c.Template
		}
		w.create(daemon.PodForNode(w.ds, template, c.Node), c.Node)
	}
	for _, m := range p.MarkRevisions {
		w.setRevision(m.Revision.Name, func(x *apps.ControllerRevision) {
			if m.Remove {
				delete(x.Annotations, m.Key)
				return
			}
			metav1.SetMetaDataAnnotation(&x.ObjectMeta, m.Key, m.Value)
		})
	}
	for _, r := range p.PruneRevisions {
		w.deleteRevision(r.Name)
	}
	if p.Status != nil {
		w.ds.Status = *p.Status.DeepCopy()
	}
}

// create adds a pod the scheduler binds to node at once; it starts now.
func (w *world) create(pod *v1.Pod, node string) {
	w.serial++
	pod.Name = fmt.Sprintf("%splan%d", pod.GenerateName, w.serial)
	pod.UID = types.UID("plan-" + pod.Name)
	pod.CreationTimestamp = metav1.NewTime(w.now)
	pod.Spec.NodeName = node
	w.pods[pod.Name] = pod
	w.start(pod)
}

// updateInPlace changes pod as an in-place update does, and plays the kubelet: each
// container given a new image restarts at once, and the pod is Ready again
// podStart from now.
func (w *world) updateInPlace(pod *v1.Pod, u daemon.PodUpdate) {
	maps.Copy(pod.Labels, u.Labels)
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	maps.Copy(pod.Annotations, u.Annotations)
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, u.AddTolerations...)
	restart := func(containers []v1.Container, statuses *[]v1.ContainerStatus, images map[string]string) {
		for i := range containers {
			image, ok := images[containers[i].Name]
			if !ok {
				continue
			}
			containers[i].Image = image
			j := slices.IndexFunc(*statuses, func(s v1.ContainerStatus) bool { return s.Name == containers[i].Name })
			if j < 0 {
				*statuses = append(*statuses, v1.ContainerStatus{Name: containers[i].Name})
				j = len(*statuses) - 1
			}
			s := &(*statuses)[j]
			s.Image, s.RestartCount = image, s.RestartCount+1
			s.State = v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(w.now)}}
		}
	}
	restart(pod.Spec.Containers, &pod.Status.ContainerStatuses, u.Images)
	restart(pod.Spec.InitContainers, &pod.Status.InitContainerStatuses, u.InitImages)
	w.start(pod)
}

// start makes pod Running, not Ready, and due to become Ready podStart from now.
func (w *world) start(pod *v1.Pod) {
	pod.Status.Phase = v1.PodRunning
	pod.Status.Conditions = slices.DeleteFunc(pod.Status.Conditions, func(c v1.PodCondition) bool { return c.Type == v1.PodReady })
	pod.Status.Conditions = append(pod.Status.Conditions, v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse,
		LastTransitionTime: metav1.NewTime(w.now)})
	w.readyAt[pod.Name] = w.now.Add(w.podStart)
}

// ripen makes Ready every pod due by now, as of the moment it was due.
func (w *world) ripen() {
	for name, at := range w.readyAt {
		if at.After(w.now) {
			continue
		}
		delete(w.readyAt, name)
		w.setPod(name, func(x *v1.Pod) {
			for i := range x.Status.Conditions {
				if c := &x.Status.Conditions[i]; c.Type == v1.PodReady {
					c.Status, c.LastTransitionTime = v1.ConditionTrue, metav1.NewTime(at)
				}
			}
		})
	}
}

// nextReady is when the next pod becomes Ready; zero when none is starting.
func (w *world) nextReady() time.Time {
	var next time.Time
	for _, at := range w.readyAt {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next
}

// setPod replaces pod name with a changed copy; a copy, so that a Plan or snapshot
// holding the old object never sees it change.
func (w *world) setPod(name string, change func(*v1.Pod)) {
	if pod, ok := w.pods[name]; ok {
		pod = pod.DeepCopy()
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		change(pod)
		w.pods[name] = pod
	}
}

func (w *world) setRevision(name string, change func(*apps.ControllerRevision)) {
	for i, r := range w.revs {
		if r.Name == name {
			r = r.DeepCopy()
			change(r)
			w.revs[i] = r
		}
	}
}

func (w *world) replaceRevision(next *apps.ControllerRevision) {
	w.setRevision(next.Name, func(r *apps.ControllerRevision) {
		uid, created := r.UID, r.CreationTimestamp
		*r = *next.DeepCopy()
		r.UID, r.CreationTimestamp = uid, created
	})
}

func (w *world) deleteRevision(name string) {
	w.revs = slices.DeleteFunc(w.revs, func(r *apps.ControllerRevision) bool { return r.Name == name })
}

func withoutController(refs []metav1.OwnerReference) []metav1.OwnerReference {
	return slices.DeleteFunc(slices.Clone(refs), func(r metav1.OwnerReference) bool { return r.Controller != nil && *r.Controller })
}

// revisionNumber is the number of the DaemonSet's revision with hash; zero if none.
func (w *world) revisionNumber(hash string) int64 {
	for _, r := range w.revs {
		if r.Labels[daemon.HashLabel] == hash && metav1.IsControlledBy(r, w.ds) {
			return r.Revision
		}
	}
	return 0
}

// owned are the live pods the DaemonSet controls, in name order.
func (w *world) owned() []*v1.Pod {
	var out []*v1.Pod
	for _, name := range w.podNames() {
		pod := w.pods[name]
		if metav1.IsControlledBy(pod, w.ds) && pod.Status.Phase != v1.PodFailed && pod.Status.Phase != v1.PodSucceeded {
			out = append(out, pod)
		}
	}
	return out
}

// oldPods counts the DaemonSet's live pods of another revision than hash.
func (w *world) oldPods(hash string) int {
	n := 0
	for _, pod := range w.owned() {
		if pod.Labels[daemon.HashLabel] != hash {
			n++
		}
	}
	return n
}

// count returns how many nodes should run the pod, and how many of them run an
// available pod of the revision hash and no other.
func (w *world) count(hash string) (desired, updated int) {
	byNode := map[string][]*v1.Pod{}
	for _, pod := range w.owned() {
		if node, ok := daemon.TargetNode(pod); ok {
			byNode[node] = append(byNode[node], pod)
		}
	}
	for _, n := range w.nodes {
		if !w.elig.Check(n).Run {
			continue
		}
		desired++
		pods := byNode[n.Name]
		if len(pods) == 1 && pods[0].Labels[daemon.HashLabel] == hash && daemon.IsAvailable(pods[0], w.ds.Spec.MinReadySeconds, w.now) {
			updated++
		}
	}
	return desired, updated
}
