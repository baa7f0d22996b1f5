package daemon

import (
	"encoding/json"
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

// inPlaceUpdate is the PodUpdate that makes old a pod of the current revision, when
// that can be done in place.
func (u *updater) inPlaceUpdate(old *v1.Pod) (PodUpdate, bool) {
	if u.inPlace == nil || u.inPlace.refused[old.UID] {
		return PodUpdate{}, false
	}
	from := u.inPlace.template(old.Labels[HashLabel])
	if from == nil {
		return PodUpdate{}, false
	}
	ch, ok := inPlaceDiff(from, &u.pl.ds.Spec.Template)
	if !ok {
		return PodUpdate{}, false
	}
	rec := inPlaceRecord{Revision: u.pl.hash, At: u.pl.now.UTC().Truncate(time.Second), Restarts: map[string]int32{}}
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
	for _, c := range u.pl.ds.Spec.Template.Spec.InitContainers {
		if image, changed := ch.initImages[c.Name]; changed && c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			restarts(c.Name, image)
		}
	}
	for _, c := range u.pl.ds.Spec.Template.Spec.Containers {
		if image, changed := ch.images[c.Name]; changed {
			restarts(c.Name, image)
		}
	}
	rec.Resized = ch.resources
	raw, _ := json.Marshal(rec)
	pu := PodUpdate{Pod: old, Reason: ReasonInPlaceUpdate, Images: ch.images, InitImages: ch.initImages,
		AddTolerations: ch.addTolerations, Resources: ch.resources, Labels: map[string]string{HashLabel: u.pl.hash},
		Annotations: map[string]string{AnnotationInPlaceUpdate: string(raw)}}
	if u.pl.hasGen {
		pu.Labels[TemplateGenerationLabel] = strconv.FormatInt(u.pl.gen, 10)
	}
	return pu, true
}
