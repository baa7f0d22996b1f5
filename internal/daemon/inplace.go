package daemon

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
)

// In-place updates (rollout.everynode.dev/in-place: "true"). When the current
// template differs from the template of an old pod's revision only in what a running
// pod lets be changed — container and init-container images, tolerations added, app
// containers' CPU and memory where the pod keeps its QoS class (resize.go) — the
// update changes that pod with one patch (and a resize) instead of deleting it and
// creating another: the new images and tolerations, the current revision's hash and
// template generation labels, and a record (AnnotationInPlaceUpdate) of what the
// patch is waiting for.
// Any other difference replaces the pod, as without the annotation.
//
// The kubelet restarts each app container and sidecar whose image changed; a plain
// init container's new image runs only when the pod is next created. From the patch
// until every such container has restarted and the pod is available again (and past
// the bake), the pod counts as unavailable in the update's budget and as waiting in
// the progress deadline. Restarts before the patch, and the one the patch causes,
// do not count against max-restarts.

// AnnotationInPlace turns in-place updates on for a DaemonSet.
const AnnotationInPlace = RolloutPrefix + "in-place"

// AnnotationInPlaceUpdate is set on a pod updated in place: the revision it was
// updated to, when, each container's restart count at that time, and which
// containers the kubelet restarts for a new image (see inPlaceRecord).
const AnnotationInPlaceUpdate = "everynode.dev/in-place-update"

// ReasonInPlaceUpdate is the reason of a PodUpdate; ReasonInPlaceUpdating is what a
// node waits for while its pod is being updated in place.
const (
	ReasonInPlaceUpdate   Reason = "InPlaceUpdate"
	ReasonInPlaceUpdating Reason = "InPlaceUpdating"
)

// PodUpdate asks for Pod to be changed, in place, into a pod of the current
// revision: its containers' images (by container name), tolerations appended, and
// labels and annotations set.
type PodUpdate struct {
	Pod            *v1.Pod
	Reason         Reason
	Images         map[string]string // app containers
	InitImages     map[string]string // init containers, sidecars included
	AddTolerations []v1.Toleration
	// Resources are app containers' new CPU and memory, set through the pod's resize
	// subresource before the rest.
	Resources   map[string]v1.ResourceRequirements
	Labels      map[string]string
	Annotations map[string]string
}

// inPlaceChange is what an in-place update changes between two templates.
type inPlaceChange struct {
	images, initImages map[string]string
	addTolerations     []v1.Toleration
	resources          map[string]v1.ResourceRequirements // app containers resized (resize.go)
}

// inPlaceDiff reports whether a pod made from template from can become a pod of
// template to in place, and what changes. The templates must be equal but for the
// images of containers with the same names in the same order, tolerations that to
// adds to from's, and app containers' CPU and memory within one QoS class.
func inPlaceDiff(from, to *v1.PodTemplateSpec) (inPlaceChange, bool) {
	var ch inPlaceChange
	f, t := &from.Spec, &to.Spec
	if len(f.Containers) != len(t.Containers) || len(f.InitContainers) != len(t.InitContainers) {
		return ch, false
	}
	adjusted := from.DeepCopy()
	var ok bool
	if ch.images, ok = imageChanges(adjusted.Spec.Containers, t.Containers); !ok {
		return ch, false
	}
	if ch.initImages, ok = imageChanges(adjusted.Spec.InitContainers, t.InitContainers); !ok {
		return ch, false
	}
	if ch.resources, ok = resourceChanges(adjusted.Spec.Containers, t.Containers); !ok || (ch.resources != nil && !sameQOS(from, to)) {
		return ch, false
	}
	for _, tol := range f.Tolerations {
		if !ContainsToleration(t.Tolerations, tol) {
			return ch, false // a toleration removed or changed
		}
	}
	for _, tol := range t.Tolerations {
		if !ContainsToleration(f.Tolerations, tol) {
			ch.addTolerations = append(ch.addTolerations, tol)
		}
	}
	adjusted.Spec.Tolerations = t.Tolerations
	if !apiequality.Semantic.DeepEqual(adjusted, to) {
		return ch, false
	}
	return ch, len(ch.images)+len(ch.initImages)+len(ch.addTolerations)+len(ch.resources) > 0
}

// imageChanges sets, in from, the images of to's containers, returning those that
// differ; false when the containers are not the same by name and order.
func imageChanges(from, to []v1.Container) (map[string]string, bool) {
	var out map[string]string
	for i := range from {
		if from[i].Name != to[i].Name {
			return nil, false
		}
		if from[i].Image != to[i].Image {
			if out == nil {
				out = map[string]string{}
			}
			out[to[i].Name] = to[i].Image
			from[i].Image = to[i].Image
		}
	}
	return out, true
}

// ContainsToleration reports whether tols holds t exactly (tolerationSeconds too).
func ContainsToleration(tols []v1.Toleration, t v1.Toleration) bool {
	return slices.ContainsFunc(tols, func(o v1.Toleration) bool { return apiequality.Semantic.DeepEqual(o, t) })
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
func (v *view) inPlaceOf(pod *v1.Pod) (inPlaceRecord, bool) {
	if _, has := pod.Annotations[AnnotationInPlaceUpdate]; !has {
		return inPlaceRecord{}, false
	}
	if got, ok := v.records[pod.UID]; ok {
		return got.record, got.ok
	}
	r, ok := inPlaceRecordOf(pod)
	if v.records == nil {
		v.records = map[types.UID]decodedRecord{}
	}
	v.records[pod.UID] = decodedRecord{r, ok}
	return r, ok
}

// decodedRecord is a pod's inPlaceRecordOf answer, kept by the view.
type decodedRecord struct {
	record inPlaceRecord
	ok     bool
}

// inPlacePending reports whether pod is a current pod whose in-place update has
// not taken effect yet: the containers it restarts have not all run again.
func (v *view) inPlacePending(pod *v1.Pod) bool {
	r, ok := v.inPlaceOf(pod)
	return ok && !r.restarted(pod)
}

// podRestarts is how often the pod's containers restarted while of the current
// revision: since its in-place update, when it had one.
func (v *view) podRestarts(pod *v1.Pod) int32 {
	if r, ok := v.inPlaceOf(pod); ok {
		return r.restartsSince(pod)
	}
	return restartCount(pod)
}

// waitingSince is when a current pod started to wait to become available: its
// in-place update, or its creation.
func (v *view) waitingSince(pod *v1.Pod) time.Time {
	if r, ok := v.inPlaceOf(pod); ok {
		return r.At
	}
	return pod.CreationTimestamp.Time
}

// revisionTemplate decodes the pod template a revision records.
func revisionTemplate(r *apps.ControllerRevision) (*v1.PodTemplateSpec, error) {
	var data struct {
		Spec struct {
			Template v1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(r.Data.Raw, &data); err != nil {
		return nil, fmt.Errorf("decoding revision %s: %w", r.Name, err)
	}
	return &data.Spec.Template, nil
}

// inPlace is what the update stage needs to update pods in place; nil when the
// DaemonSet does not ask for it.
type inPlace struct {
	byHash    map[string]*apps.ControllerRevision
	templates map[string]*v1.PodTemplateSpec // decoded, by hash; nil for one that cannot be
	refused   map[types.UID]bool             // Snapshot.InPlaceRefused
}

func newInPlace(old []*apps.ControllerRevision, refused map[types.UID]bool) *inPlace {
	ip := &inPlace{byHash: make(map[string]*apps.ControllerRevision, len(old)), templates: map[string]*v1.PodTemplateSpec{}, refused: refused}
	for _, r := range old {
		if h := r.Labels[HashLabel]; h != "" {
			ip.byHash[h] = r
		}
	}
	return ip
}

func (ip *inPlace) template(hash string) *v1.PodTemplateSpec {
	if t, ok := ip.templates[hash]; ok {
		return t
	}
	var t *v1.PodTemplateSpec
	if r := ip.byHash[hash]; r != nil {
		t, _ = revisionTemplate(r)
	}
	ip.templates[hash] = t
	return t
}

// replaceOld plans the update of node n's old pod: in place when the DaemonSet asks
// for it and the pod's revision allows it, else a delete, so that a new pod takes
// its place.
func (v *view) replaceOld(old *v1.Pod, p *Plan) {
	if u, ok := v.inPlaceUpdate(old); ok {
		p.Updates = append(p.Updates, u)
		return
	}
	p.Deletes = append(p.Deletes, PodDelete{Pod: old, Reason: ReasonUpdate})
}

// inPlaceUpdate is the PodUpdate that makes old a pod of the current revision, when
// that can be done in place.
func (v *view) inPlaceUpdate(old *v1.Pod) (PodUpdate, bool) {
	if v.inPlace == nil || v.inPlace.refused[old.UID] {
		return PodUpdate{}, false
	}
	from := v.inPlace.template(old.Labels[HashLabel])
	if from == nil {
		return PodUpdate{}, false
	}
	ch, ok := inPlaceDiff(from, &v.ds.Spec.Template)
	if !ok {
		return PodUpdate{}, false
	}
	rec := inPlaceRecord{Revision: v.hash, At: v.now.UTC().Truncate(time.Second), Restarts: map[string]int32{}}
	for _, statuses := range [][]v1.ContainerStatus{old.Status.InitContainerStatuses, old.Status.ContainerStatuses} {
		for _, s := range statuses {
			rec.Restarts[s.Name] = s.RestartCount
		}
	}
	restarts := func(name, image string) {
		rec.Restarting = append(rec.Restarting, name)
		if rec.Images == nil {
			rec.Images = map[string]string{}
		}
		rec.Images[name] = image
	}
	for _, c := range v.ds.Spec.Template.Spec.InitContainers {
		if image, changed := ch.initImages[c.Name]; changed && c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			restarts(c.Name, image)
		}
	}
	for _, c := range v.ds.Spec.Template.Spec.Containers {
		if image, changed := ch.images[c.Name]; changed {
			restarts(c.Name, image)
		}
	}
	rec.Resized = ch.resources
	raw, _ := json.Marshal(rec)
	u := PodUpdate{Pod: old, Reason: ReasonInPlaceUpdate, Images: ch.images, InitImages: ch.initImages,
		AddTolerations: ch.addTolerations, Resources: ch.resources, Labels: map[string]string{HashLabel: v.hash},
		Annotations: map[string]string{AnnotationInPlaceUpdate: string(raw)}}
	if v.hasGen {
		u.Labels[TemplateGenerationLabel] = strconv.FormatInt(v.gen, 10)
	}
	return u, true
}

// checkInPlace adds the Problem of an in-place annotation that cannot work: beside
// maxSurge (an in-place update has no second pod to surge with), or in companion
// mode, where everynode only deletes pods.
func (p *Policy) checkInPlace(ds *apps.DaemonSet, companion bool) {
	if !p.InPlace {
		return
	}
	if companion {
		p.Problems = append(p.Problems, fmt.Sprintf("annotation %s cannot work in companion mode, where everynode only deletes pods; remove it", AnnotationInPlace))
		return
	}
	if allowsSurge(ds) {
		p.Problems = append(p.Problems, fmt.Sprintf("annotation %s needs maxSurge 0: a pod updated in place is itself unavailable while it restarts; set spec.updateStrategy.rollingUpdate.maxSurge to 0 and maxUnavailable to the budget",
			AnnotationInPlace))
	}
}
