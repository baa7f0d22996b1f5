package chart

import (
	"strings"
	"testing"

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
