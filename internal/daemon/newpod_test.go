package daemon

import (
	"reflect"
	"strings"
	"testing"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodTemplate(t *testing.T) {
	tests := []struct {
		name    string
		ann     map[string]string
		hash    string
		wantGen string // "" : no generation label
	}{
		{name: "hash label", hash: "abc"},
		{name: "template generation label from the annotation", ann: map[string]string{TemplateGenerationAnnotation: "5"}, hash: "abc", wantGen: "5"},
		{name: "unparsable generation: no label", ann: map[string]string{TemplateGenerationAnnotation: "x"}, hash: "abc"},
		{name: "no hash: no hash label"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := newDS("ds", withTolerations(v1.Toleration{Key: "k", Operator: v1.TolerationOpExists}))
			ds.Annotations = tt.ann
			before := ds.DeepCopy()
			tmpl := PodTemplate(ds, tt.hash)
			h, hasHash := tmpl.Labels[HashLabel]
			if hasHash != (tt.hash != "") || h != tt.hash {
				t.Errorf("hash label = %q (%v), want %q", h, hasHash, tt.hash)
			}
			if g := tmpl.Labels[TemplateGenerationLabel]; g != tt.wantGen {
				t.Errorf("generation label = %q, want %q", g, tt.wantGen)
			}
			if tmpl.Labels["app"] != "ds" {
				t.Errorf("template labels lost: %v", tmpl.Labels)
			}
			if want := DaemonPodTolerations(&before.Spec.Template.Spec); !reflect.DeepEqual(tmpl.Spec.Tolerations, want) {
				t.Errorf("tolerations = %v, want the daemon tolerations %v", tmpl.Spec.Tolerations, want)
			}
			if !reflect.DeepEqual(before, ds) {
				t.Error("DaemonSet modified")
			}
		})
	}
}

func TestPodForNode(t *testing.T) {
	preferred := []v1.PreferredSchedulingTerm{{Weight: 5, Preference: exprTerm("disk", v1.NodeSelectorOpIn, "ssd")}}
	podAffinity := &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{TopologyKey: "zone"}}}
	podAntiAffinity := &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{TopologyKey: "host"}}}

	tests := []struct {
		name     string
		affinity *v1.Affinity
		check    func(t *testing.T, a *v1.Affinity)
	}{
		{name: "no affinity: pinned"},
		{name: "pod affinity only: pinned, pod affinity kept",
			affinity: &v1.Affinity{PodAffinity: podAffinity, PodAntiAffinity: podAntiAffinity},
			check: func(t *testing.T, a *v1.Affinity) {
				if !reflect.DeepEqual(a.PodAffinity, podAffinity) || !reflect.DeepEqual(a.PodAntiAffinity, podAntiAffinity) {
					t.Errorf("pod (anti-)affinity lost: %+v", a)
				}
			}},
		{name: "required terms replaced, preferred kept",
			affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution:  &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{exprTerm("zone", v1.NodeSelectorOpIn, "a"), fieldTerm("other")}},
				PreferredDuringSchedulingIgnoredDuringExecution: preferred,
			}},
			check: func(t *testing.T, a *v1.Affinity) {
				if !reflect.DeepEqual(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution, preferred) {
					t.Errorf("preferred terms lost: %+v", a.NodeAffinity)
				}
			}},
		{name: "preferred only: pinned beside it",
			affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: preferred}},
			check: func(t *testing.T, a *v1.Affinity) {
				if len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
					t.Errorf("preferred terms lost: %+v", a.NodeAffinity)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := newDS("agent", func(ds *apps.DaemonSet) {
				ds.Spec.Template.Spec.Affinity = tt.affinity
				ds.Spec.Template.Annotations = map[string]string{"note": "x"}
				ds.Spec.Template.Finalizers = []string{"example.com/keep"}
			})
			before := ds.DeepCopy()
			tmpl := PodTemplate(ds, "h1")
			tmplBefore := tmpl.DeepCopy()
			pod := PodForNode(ds, tmpl, "node-7")

			if pod.Spec.NodeName != "" {
				t.Errorf("spec.nodeName = %q, want empty: the scheduler binds", pod.Spec.NodeName)
			}
			a := pod.Spec.Affinity
			want := &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{fieldTerm("node-7")}}
			if a == nil || a.NodeAffinity == nil || !reflect.DeepEqual(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution, want) {
				t.Fatalf("required node affinity = %+v, want only matchFields metadata.name In [node-7]", a)
			}
			if node, ok := TargetNode(pod); !ok || node != "node-7" {
				t.Errorf("TargetNode = %q, %v", node, ok)
			}
			if tt.check != nil {
				tt.check(t, a)
			}
			if pod.Labels[HashLabel] != "h1" || pod.Labels["app"] != "agent" {
				t.Errorf("labels = %v", pod.Labels)
			}
			if pod.GenerateName != "agent-" || pod.Name != "" || pod.Namespace != testNS {
				t.Errorf("name = %q/%q/%q, want generateName agent- in %s", pod.Namespace, pod.Name, pod.GenerateName, testNS)
			}
			if pod.Annotations["note"] != "x" || !reflect.DeepEqual(pod.Finalizers, []string{"example.com/keep"}) {
				t.Errorf("annotations/finalizers = %v %v", pod.Annotations, pod.Finalizers)
			}
			ref := metav1.GetControllerOf(pod)
			if len(pod.OwnerReferences) != 1 || ref == nil || ref.UID != ds.UID || ref.Kind != "DaemonSet" || ref.APIVersion != "apps/v1" ||
				ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
				t.Errorf("owner references = %+v", pod.OwnerReferences)
			}
			if !reflect.DeepEqual(tmpl, tmplBefore) || !reflect.DeepEqual(ds, before) {
				t.Error("template or DaemonSet modified")
			}
			// Pods made from one template share nothing.
			other := PodForNode(ds, tmpl, "node-8")
			other.Labels["x"] = "y"
			other.Spec.Containers[0].Image = "changed"
			if pod.Labels["x"] != "" || pod.Spec.Containers[0].Image == "changed" || tmpl.Spec.Containers[0].Image == "changed" {
				t.Error("pods share memory with each other or with the template")
			}
		})
	}
}

func TestPodNamePrefix(t *testing.T) {
	long := strings.Repeat("a", 253)
	tests := []struct{ name, in, want string }{
		{"name and a dash", "agent", "agent-"},
		{"longest name still gets its dash (the API server shortens generated names)", long, long + "-"},
		{"invalid as a prefix: bare name", "UPPER", "UPPER"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := podNamePrefix(tt.in); got != tt.want {
				t.Errorf("podNamePrefix = %q, want %q", got, tt.want)
			}
		})
	}
}
