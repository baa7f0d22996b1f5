package chart

import (
	"io/fs"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/everynode/everynode/charts"
)

func TestRender_ChecksValuesAgainstTheSchema(t *testing.T) {
	c, err := Load(charts.Everynode())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Render(c, "everynode", "everynode", map[string]any{"mode": "sideways"}); err == nil || !strings.Contains(err.Error(), "mode") {
		t.Fatalf("mode=sideways rendered with error %v, want the schema's refusal naming mode", err)
	}
	objs, err := Render(c, "rel", "ns", map[string]any{"mode": "full"})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "Deployment" && o.GetName() != "rel-everynode" {
			t.Errorf("the release rel's Deployment is named %s, want rel-everynode (the chart's fullname)", o.GetName())
		}
	}
	if len(objs) < 5 {
		t.Errorf("the chart rendered %d objects, want its Deployment, RBAC, Service and PodDisruptionBudget", len(objs))
	}
}

// argocdHealthCheck.enabled renders the health check, word for word, under the key
// Argo CD reads from argocd-cm; it is off by default.
func TestRender_ArgoCDHealthCheck(t *testing.T) {
	c, err := Load(charts.Everynode())
	if err != nil {
		t.Fatal(err)
	}
	script, err := fs.ReadFile(charts.Everynode(), "files/argocd-health.lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, enabled := range []bool{false, true} {
		objs, err := Render(c, "everynode", "everynode", map[string]any{"argocdHealthCheck": map[string]any{"enabled": enabled}})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range objs {
			if o.GetKind() != "ConfigMap" || o.GetName() != "everynode-argocd-health" {
				continue
			}
			v, _, _ := unstructured.NestedString(o.Object, "data", "resource.customizations.health.apps_DaemonSet")
			got = append(got, v)
		}
		switch {
		case !enabled && len(got) != 0:
			t.Errorf("disabled, the chart rendered %d health check ConfigMaps", len(got))
		case enabled && (len(got) != 1 || got[0] != strings.TrimRight(string(script), "\n")):
			t.Errorf("enabled, the chart rendered %q, want files/argocd-health.lua under resource.customizations.health.apps_DaemonSet", got)
		}
	}
}
