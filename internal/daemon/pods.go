package daemon

import (
	"strconv"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The DaemonSet's pods: what one is — the node it is for, whether it is Ready,
// available, of the current revision, on its way out — and how a new one is made.

// TargetNode returns the node a daemon pod belongs to: its spec.nodeName once bound,
// or before that the single node its required affinity pins it to with
// `matchFields metadata.name In [node]`. ok is false for a pod pinned to no one node.
func TargetNode(pod *v1.Pod) (node string, ok bool) {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName, true
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return "", false
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, req := range term.MatchFields {
			if req.Key == metav1.ObjectNameField && req.Operator == v1.NodeSelectorOpIn {
				if len(req.Values) != 1 {
					return "", false
				}
				return req.Values[0], true
			}
		}
	}
	return "", false
}

// deleting reports whether pod is on its way out: marked for deletion, or deleted by
// us already.
func (pl *Placement) deleting(pod *v1.Pod) bool {
	return pod.DeletionTimestamp != nil || pl.deleteInFlight(pod)
}

// deleteInFlight reports whether pod's delete was sent and is not yet seen.
func (pl *Placement) deleteInFlight(pod *v1.Pod) bool {
	return len(pl.inflight.Deletes) > 0 && pl.inflight.Deletes[pod.UID]
}

// hasLivePod reports whether a pod on n is neither finished nor on its way out.
func (pl *Placement) hasLivePod(n *nodeState) bool {
	for _, pod := range n.pods {
		if !pl.deleting(pod) && !isTerminal(pod) {
			return true
		}
	}
	return false
}

// updated reports whether pod runs the current template.
func (pl *Placement) updated(pod *v1.Pod) bool {
	return isUpdated(pod, pl.hash, pl.gen, pl.hasGen) || pl.dupHashes[pod.Labels[HashLabel]]
}

// available reports whether pod has been Ready for minReadySeconds.
func (pl *Placement) available(pod *v1.Pod) bool {
	return IsAvailable(pod, pl.ds.Spec.MinReadySeconds, pl.now)
}

func isTerminal(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodFailed || pod.Status.Phase == v1.PodSucceeded
}

func readyCondition(pod *v1.Pod) *v1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == v1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// IsReady reports whether the pod's Ready condition is True.
func IsReady(pod *v1.Pod) bool {
	c := readyCondition(pod)
	return c != nil && c.Status == v1.ConditionTrue
}

// IsAvailable reports whether the pod has been Ready for more than minReadySeconds
// at now (any time at all when minReadySeconds is zero).
func IsAvailable(pod *v1.Pod, minReadySeconds int32, now time.Time) bool {
	c := readyCondition(pod)
	if c == nil || c.Status != v1.ConditionTrue {
		return false
	}
	if minReadySeconds == 0 {
		return true
	}
	return !c.LastTransitionTime.IsZero() && availableAt(c, minReadySeconds).Before(now)
}

// untilAvailable returns how long a Ready pod still has to wait to count as
// available, and false if the pod is not Ready or already available.
func untilAvailable(pod *v1.Pod, minReadySeconds int32, now time.Time) (time.Duration, bool) {
	if minReadySeconds == 0 {
		return 0, false
	}
	c := readyCondition(pod)
	if c == nil || c.Status != v1.ConditionTrue || c.LastTransitionTime.IsZero() {
		return 0, false
	}
	at := availableAt(c, minReadySeconds)
	if at.Before(now) {
		return 0, false
	}
	// Availability begins strictly after the deadline: look again just past it.
	return at.Sub(now) + time.Millisecond, true
}

func availableAt(c *v1.PodCondition, minReadySeconds int32) time.Time {
	return c.LastTransitionTime.Add(time.Duration(minReadySeconds) * time.Second)
}

// templateGeneration is the DaemonSet's legacy template generation, if it records
// one that parses.
func templateGeneration(annotations map[string]string) (int64, bool) {
	s, ok := annotations[TemplateGenerationAnnotation]
	if !ok {
		return 0, false
	}
	g, err := strconv.ParseInt(s, 10, 64)
	return g, err == nil
}

// isUpdated reports whether pod runs the current template: its revision hash label
// matches hash, or its legacy template-generation label matches the DaemonSet's.
func isUpdated(pod *v1.Pod, hash string, gen int64, hasGen bool) bool {
	if hash != "" && pod.Labels[HashLabel] == hash {
		return true
	}
	return hasGen && pod.Labels[TemplateGenerationLabel] == strconv.FormatInt(gen, 10)
}

// olderFirst orders the pods on one node by which to keep: bound pods before
// unbound ones, then oldest first, then by name.
func olderFirst(a, b *v1.Pod) int {
	if aBound, bBound := a.Spec.NodeName != "", b.Spec.NodeName != ""; aBound != bBound {
		if aBound {
			return -1
		}
		return 1
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		if a.CreationTimestamp.Before(&b.CreationTimestamp) {
			return -1
		}
		return 1
	}
	switch {
	case a.Name < b.Name:
		return -1
	case a.Name > b.Name:
		return 1
	}
	return 0
}

// PodTemplate is the template every new pod of ds is made from: ds's template with
// the daemon tolerations, labelled with the revision hash and, when ds records one,
// its template generation.
func PodTemplate(ds *apps.DaemonSet, hash string) *v1.PodTemplateSpec {
	return podTemplate(&ds.Spec.Template, ds.Annotations, hash, true)
}

// podTemplate prepares template for new pods. Only the current template carries the
// DaemonSet's template generation: an older revision's pods must not pass for current.
func podTemplate(template *v1.PodTemplateSpec, dsAnnotations map[string]string, hash string, current bool) *v1.PodTemplateSpec {
	t := template.DeepCopy()
	t.Spec.Tolerations = DaemonPodTolerations(&t.Spec)
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	if gen, ok := templateGeneration(dsAnnotations); ok && current {
		t.Labels[TemplateGenerationLabel] = strconv.FormatInt(gen, 10)
	}
	if hash != "" {
		t.Labels[HashLabel] = hash
	}
	return t
}

// PodForNode makes the pod of ds for node from a PodTemplate. The pod is not bound:
// spec.nodeName stays empty and the required node affinity is replaced by the single
// term `matchFields metadata.name In [node]`, so the scheduler binds it there while
// still checking resources and ports. Preferred node affinity and pod (anti-)affinity
// are kept.
func PodForNode(ds *apps.DaemonSet, template *v1.PodTemplateSpec, node string) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       ds.Namespace,
			GenerateName:    podNamePrefix(ds.Name),
			Labels:          copyMap(template.Labels),
			Annotations:     copyMap(template.Annotations),
			Finalizers:      append([]string(nil), template.Finalizers...),
			OwnerReferences: []metav1.OwnerReference{*ControllerRef(ds)},
		},
		Spec: *template.Spec.DeepCopy(),
	}
	pin := &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchFields: []v1.NodeSelectorRequirement{{
			Key: metav1.ObjectNameField, Operator: v1.NodeSelectorOpIn, Values: []string{node},
		}},
	}}}
	if pod.Spec.Affinity == nil {
		pod.Spec.Affinity = &v1.Affinity{}
	}
	if pod.Spec.Affinity.NodeAffinity == nil {
		pod.Spec.Affinity.NodeAffinity = &v1.NodeAffinity{}
	}
	pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = pin
	return pod
}

// podNamePrefix is "<name>-", or the bare name when that would not be a valid prefix.
func podNamePrefix(name string) string {
	prefix := name + "-"
	if len(apivalidation.NameIsDNSSubdomain(prefix, true)) != 0 {
		return name
	}
	return prefix
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
