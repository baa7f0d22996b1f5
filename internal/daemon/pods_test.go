package daemon

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTargetNode(t *testing.T) {
	ds := newDS("ds")
	twoValues := pinTo("n1")
	twoValues.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values = []string{"n1", "n2"}
	exprOnly := affinity(exprTerm("zone", v1.NodeSelectorOpIn, "a"))
	secondTerm := affinity(exprTerm("zone", v1.NodeSelectorOpIn, "a"), fieldTerm("n3"))
	notIn := pinTo("n1")
	notIn.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Operator = v1.NodeSelectorOpNotIn

	tests := []struct {
		name   string
		pod    *v1.Pod
		want   string
		wantOK bool
	}{
		{"bound: spec.nodeName", newPod(ds, "p", "n1"), "n1", true},
		{"bound wins over affinity", newPod(ds, "p", "n1", func(p *v1.Pod) { p.Spec.Affinity = pinTo("n2") }), "n1", true},
		{"unbound: matchFields metadata.name In [node]", newPod(ds, "p", "n1", unbound()), "n1", true},
		{"unbound without affinity", newPod(ds, "p", ""), "", false},
		{"matchFields with two values", newPod(ds, "p", "", func(p *v1.Pod) { p.Spec.Affinity = twoValues }), "", false},
		{"matchExpressions only", newPod(ds, "p", "", func(p *v1.Pod) { p.Spec.Affinity = exprOnly }), "", false},
		{"pin found in a later term", newPod(ds, "p", "", func(p *v1.Pod) { p.Spec.Affinity = secondTerm }), "n3", true},
		{"NotIn is not a pin", newPod(ds, "p", "", func(p *v1.Pod) { p.Spec.Affinity = notIn }), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := TargetNode(tt.pod)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("TargetNode = %q, %v; want %q, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestReadinessAndAvailability(t *testing.T) {
	ds := newDS("ds")
	tests := []struct {
		name         string
		opts         []podOpt
		minReady     int32
		ready, avail bool
		wait         time.Duration
		waiting      bool
	}{
		{name: "no Ready condition", opts: []podOpt{func(p *v1.Pod) { p.Status.Conditions = nil }}},
		{name: "Ready false", opts: []podOpt{notReady()}},
		{name: "Ready, minReadySeconds zero: available at once", opts: []podOpt{readySince(t0)}, ready: true, avail: true},
		{name: "Ready longer than minReadySeconds: available", opts: []podOpt{readySince(t0.Add(-11 * time.Second))}, minReady: 10, ready: true, avail: true},
		{name: "Ready shorter than minReadySeconds: waits the rest", opts: []podOpt{readySince(t0.Add(-4 * time.Second))}, minReady: 10,
			ready: true, wait: 6*time.Second + time.Millisecond, waiting: true},
		{name: "Ready exactly minReadySeconds: not yet (strictly after)", opts: []podOpt{readySince(t0.Add(-10 * time.Second))}, minReady: 10,
			ready: true, wait: time.Millisecond, waiting: true},
		{name: "Ready without transition time never available with minReadySeconds",
			opts: []podOpt{func(p *v1.Pod) { p.Status.Conditions[0].LastTransitionTime = metav1.Time{} }}, minReady: 10, ready: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := newPod(ds, "p", "n1", tt.opts...)
			if got := IsReady(pod); got != tt.ready {
				t.Errorf("IsReady = %v, want %v", got, tt.ready)
			}
			if got := IsAvailable(pod, tt.minReady, t0); got != tt.avail {
				t.Errorf("IsAvailable = %v, want %v", got, tt.avail)
			}
			wait, waiting := untilAvailable(pod, tt.minReady, t0)
			if wait != tt.wait || waiting != tt.waiting {
				t.Errorf("untilAvailable = %v, %v; want %v, %v", wait, waiting, tt.wait, tt.waiting)
			}
			if waiting && !IsAvailable(pod, tt.minReady, t0.Add(wait)) {
				t.Errorf("not available after waiting %v", wait)
			}
		})
	}
}

func TestIsUpdated(t *testing.T) {
	ds := newDS("ds")
	gen := func(g string) podOpt { return func(p *v1.Pod) { p.Labels[TemplateGenerationLabel] = g } }
	tests := []struct {
		name   string
		pod    podOpt
		hash   string
		gen    int64
		hasGen bool
		want   bool
	}{
		{"hash label matches", withHash("h1"), "h1", 0, false, true},
		{"hash label differs", withHash("h0"), "h1", 0, false, false},
		{"empty hash matches nothing", withHash(""), "", 0, false, false},
		{"legacy generation matches", gen("3"), "h1", 3, true, true},
		{"legacy generation differs", gen("2"), "h1", 3, true, false},
		{"generation label ignored without the annotation", gen("0"), "h1", 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := newPod(ds, "p", "n1", withHash("other"), tt.pod)
			if got := isUpdated(pod, tt.hash, tt.gen, tt.hasGen); got != tt.want {
				t.Errorf("isUpdated = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTemplateGeneration(t *testing.T) {
	tests := []struct {
		name  string
		ann   map[string]string
		want  int64
		found bool
	}{
		{"absent", nil, 0, false},
		{"parses", map[string]string{TemplateGenerationAnnotation: "7"}, 7, true},
		{"unparsable is ignored", map[string]string{TemplateGenerationAnnotation: "seven"}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, ok := templateGeneration(tt.ann)
			if g != tt.want || ok != tt.found {
				t.Errorf("templateGeneration = %d, %v; want %d, %v", g, ok, tt.want, tt.found)
			}
		})
	}
}

func TestOlderFirst(t *testing.T) {
	ds := newDS("ds")
	early, late := createdAt(t0.Add(-2*time.Hour)), createdAt(t0.Add(-time.Hour))
	tests := []struct {
		name string
		a, b *v1.Pod
		want int
	}{
		{"bound before unbound even if younger", newPod(ds, "a", "n", late), newPod(ds, "b", "n", early, unbound()), -1},
		{"unbound after bound", newPod(ds, "a", "n", early, unbound()), newPod(ds, "b", "n", late), 1},
		{"older first", newPod(ds, "a", "n", late), newPod(ds, "b", "n", early), 1},
		{"same age: by name", newPod(ds, "a", "n", early), newPod(ds, "b", "n", early), -1},
		{"same pod", newPod(ds, "a", "n", early), newPod(ds, "a", "n", early), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := olderFirst(tt.a, tt.b); got != tt.want {
				t.Errorf("olderFirst = %d, want %d", got, tt.want)
			}
			if got := olderFirst(tt.b, tt.a); got != -tt.want {
				t.Errorf("olderFirst reversed = %d, want %d", got, -tt.want)
			}
		})
	}
}
