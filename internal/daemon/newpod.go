package daemon

import (
	"strconv"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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
