package rolloutplan

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	apps "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/everynode/everynode/internal/daemon"
)

// ReadManifest reads the DaemonSet of a YAML or JSON manifest. A manifest of several
// documents (a Helm chart's output, say) may hold other objects; it must hold one
// DaemonSet, or one named name when name is not empty.
func ReadManifest(data []byte, name string) (*apps.DaemonSet, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var found []*apps.DaemonSet
	var kinds []string
	for {
		var raw runtime.RawExtension
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("it is not YAML or JSON: %v", err)
		}
		if len(bytes.TrimSpace(raw.Raw)) == 0 || string(raw.Raw) == "null" {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(raw.Raw, &tm); err != nil {
			return nil, fmt.Errorf("it is not a Kubernetes object: %v", err)
		}
		if tm.Kind != "DaemonSet" {
			kinds = append(kinds, tm.Kind)
			continue
		}
		if tm.APIVersion != apps.SchemeGroupVersion.String() {
			return nil, fmt.Errorf("its DaemonSet is %s; write it as apiVersion: apps/v1", orDash(tm.APIVersion))
		}
		ds := &apps.DaemonSet{}
		if err := yaml.UnmarshalStrict(raw.Raw, ds); err != nil {
			msg := strings.TrimPrefix(err.Error(), "error unmarshaling JSON: while decoding JSON: ")
			return nil, fmt.Errorf("its DaemonSet does not parse: %s", strings.TrimPrefix(msg, "json: "))
		}
		if name == "" || ds.Name == name {
			found = append(found, ds)
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1 && name == "":
		return nil, fmt.Errorf("it holds %d DaemonSets: name the one to plan, `everynode rollout plan NAME -f FILE`", len(found))
	case len(found) > 1:
		return nil, fmt.Errorf("it holds %d DaemonSets named %q", len(found), name)
	case name != "":
		return nil, fmt.Errorf("it holds no DaemonSet named %q (kinds found: %s)", name, orDash(strings.Join(kinds, ", ")))
	}
	return nil, fmt.Errorf("it holds no DaemonSet (kinds found: %s)", orDash(strings.Join(kinds, ", ")))
}

// WithManifest is cur with m applied: m's template, update strategy,
// minReadySeconds and revisionHistoryLimit, and m's annotations set over cur's (an
// annotation m does not name is kept), the generation moved on when the spec
// changes. cur is not modified. The API server's defaults, and the template
// generation it records, are not filled in: the command has the API server store
// the result in a dry run, which does, before it plans.
func WithManifest(cur, m *apps.DaemonSet) (*apps.DaemonSet, error) {
	if m.Name != "" && m.Name != cur.Name {
		return nil, fmt.Errorf("the manifest is of DaemonSet %q, not %q", m.Name, cur.Name)
	}
	if m.Namespace != "" && m.Namespace != cur.Namespace {
		return nil, fmt.Errorf("the manifest's DaemonSet is in namespace %q, not %q: pass -n %s", m.Namespace, cur.Namespace, m.Namespace)
	}
	m = m.DeepCopy()
	if m.Spec.Selector == nil {
		return nil, fmt.Errorf("the manifest's DaemonSet has no spec.selector: copy it from the cluster's (`everynode kubectl get ds %s -o yaml`)", cur.Name)
	}
	if !apiequality.Semantic.DeepEqual(m.Spec.Selector, cur.Spec.Selector) {
		return nil, fmt.Errorf("the manifest changes spec.selector, which the API server refuses (it is immutable): keep the cluster's, %s",
			metav1.FormatLabelSelector(cur.Spec.Selector))
	}
	if sel, err := metav1.LabelSelectorAsSelector(m.Spec.Selector); err == nil && !sel.Matches(labels.Set(m.Spec.Template.Labels)) {
		return nil, fmt.Errorf("the manifest's spec.template.metadata.labels do not match spec.selector %s, which the API server refuses",
			metav1.FormatLabelSelector(m.Spec.Selector))
	}
	next := cur.DeepCopy()
	next.Spec.Template = m.Spec.Template
	next.Spec.UpdateStrategy = m.Spec.UpdateStrategy
	next.Spec.MinReadySeconds = m.Spec.MinReadySeconds
	if m.Spec.RevisionHistoryLimit != nil {
		next.Spec.RevisionHistoryLimit = m.Spec.RevisionHistoryLimit
	}
	for k, v := range m.Annotations {
		if k == daemon.TemplateGenerationAnnotation || k == lastApplied {
			continue
		}
		if next.Annotations == nil {
			next.Annotations = map[string]string{}
		}
		next.Annotations[k] = v
	}
	if !apiequality.Semantic.DeepEqual(next.Spec, cur.Spec) {
		next.Generation++
	}
	return next, nil
}

// lastApplied is the annotation kubectl apply keeps the applied manifest in.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"
