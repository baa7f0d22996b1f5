package rolloutplan

import (
	"strings"
	"testing"

	apps "k8s.io/api/apps/v1"

	"github.com/everynode/everynode/internal/daemon"
)

const manifestV2 = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
  annotations:
    rollout.everynode.dev/partition: "1"
spec:
  selector:
    matchLabels: {app: agent}
  updateStrategy:
    type: RollingUpdate
    rollingUpdate: {maxUnavailable: 1}
  template:
    metadata:
      labels: {app: agent}
    spec:
      containers:
      - name: agent
        image: agent:v3
`

func TestReadManifest(t *testing.T) {
	configMap := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\n"
	json := `{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"agent"},"spec":{}}`
	for _, tc := range []struct {
		name, data, ds string
		wantName       string
		wantErr        string
	}{
		{name: "YAML", data: manifestV2, wantName: "agent"},
		{name: "JSON", data: json, wantName: "agent"},
		{name: "among other objects", data: configMap + "---\n" + manifestV2, wantName: "agent"},
		{name: "the one named", data: strings.Replace(manifestV2, "name: agent", "name: other", 1) + "---\n" + manifestV2, ds: "agent", wantName: "agent"},
		{name: "two, none named", data: manifestV2 + "---\n" + manifestV2, wantErr: "it holds 2 DaemonSets: name the one to plan"},
		{name: "none named so", data: manifestV2, ds: "other", wantErr: `it holds no DaemonSet named "other"`},
		{name: "no DaemonSet", data: configMap, wantErr: "it holds no DaemonSet (kinds found: ConfigMap)"},
		{name: "old apiVersion", data: strings.Replace(manifestV2, "apps/v1", "extensions/v1beta1", 1), wantErr: "write it as apiVersion: apps/v1"},
		{name: "unknown field", data: strings.Replace(manifestV2, "  selector:", "  selektor: {}\n  selector:", 1), wantErr: `its DaemonSet does not parse: unknown field "selektor"`},
		{name: "not YAML", data: "kind: [", wantErr: "it is not YAML or JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds, err := ReadManifest([]byte(tc.data), tc.ds)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case ds.Name != tc.wantName:
				t.Fatalf("read DaemonSet %q, want %q", ds.Name, tc.wantName)
			}
		})
	}
}

// stored is the DaemonSet as the API server keeps it: defaulted, with the template
// generation recorded.
func stored(ds *apps.DaemonSet) *apps.DaemonSet {
	ds = ds.DeepCopy()
	ds.Annotations = map[string]string{daemon.TemplateGenerationAnnotation: "2"}
	return ds
}

func TestWithManifest(t *testing.T) {
	cur := stored(newDS())
	m, err := ReadManifest([]byte(manifestV2), "")
	if err != nil {
		t.Fatal(err)
	}
	next, err := WithManifest(cur, m)
	if err != nil {
		t.Fatal(err)
	}
	if img := next.Spec.Template.Spec.Containers[0].Image; img != "agent:v3" || next.Generation != cur.Generation+1 {
		t.Errorf("image %s, generation %d; want agent:v3, %d", img, next.Generation, cur.Generation+1)
	}
	if g := next.Annotations[daemon.TemplateGenerationAnnotation]; g != "2" {
		t.Errorf("template generation %s, want 2: the API server moves it on", g)
	}
	if p := next.Annotations[daemon.AnnotationPartition]; p != "1" {
		t.Errorf("partition %q, want the manifest's 1", p)
	}
	if cur.Spec.Template.Spec.Containers[0].Image != "agent:v2" {
		t.Errorf("the cluster's DaemonSet was changed")
	}

	// The manifest of what the cluster runs changes nothing.
	same, _ := ReadManifest([]byte(strings.Replace(manifestV2, "agent:v3", "agent:v2", 1)), "")
	next, err = WithManifest(cur, same)
	if err != nil {
		t.Fatal(err)
	}
	if next.Generation != cur.Generation || next.Annotations[daemon.TemplateGenerationAnnotation] != "2" {
		t.Errorf("an unchanged template moved the generation to %d, template generation %s", next.Generation, next.Annotations[daemon.TemplateGenerationAnnotation])
	}

	for _, tc := range []struct{ name, from, to, wantErr string }{
		{"another DaemonSet", "name: agent", "name: other", `the manifest is of DaemonSet "other", not "agent"`},
		{"another namespace", "name: agent", "name: agent\n  namespace: kube-system", "pass -n kube-system"},
		{"selector changed", "matchLabels: {app: agent}", "matchLabels: {app: agent2}", "spec.selector, which the API server refuses"},
		{"labels off the selector", "labels: {app: agent}", "labels: {app: other}", "do not match spec.selector app=agent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ReadManifest([]byte(strings.Replace(manifestV2, tc.from, tc.to, 1)), "")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := WithManifest(cur, m); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
			}
		})
	}
}

// A manifest planned on the cluster: the new template rolls out, the manifest's
// partition holds it.
func TestPlanManifest(t *testing.T) {
	in := input(stored(newDS()), names("n", 3))
	m, _ := ReadManifest([]byte(manifestV2), "")
	ds, err := WithManifest(in.DaemonSet, m)
	if err != nil {
		t.Fatal(err)
	}
	in.DaemonSet = ds
	s, err := Plan(in, Options{Start: t0, PodStart: DefaultPodStart})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(steps(s), "; "), "t+0s n01; t+5s n02; held t+10s PartitionHeld 2/3"; got != want {
		t.Errorf("schedule %s, want %s", got, want)
	}
}
