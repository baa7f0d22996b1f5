package sandbox

import (
	"slices"
	"testing"

	apps "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/everynode/everynode/internal/chart"
	"github.com/everynode/everynode/internal/realnode"
)

// TestChartValues_RunTheImportedImageOnTheRealNodes renders the embedded chart as
// --controller chart and chart-companion install it: the Deployment runs the image
// the sandbox imports into the real nodes, never pulls it, runs only on real nodes,
// in the mode asked for.
func TestChartValues_RunTheImportedImageOnTheRealNodes(t *testing.T) {
	c, err := loadChart()
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{ControllerChart, ControllerChartCompanion} {
		mode := chartMode(flag)
		objs, err := chart.Render(c, ChartRelease, ChartNamespace, chartValues(mode))
		if err != nil {
			t.Fatalf("--controller %s: %v", flag, err)
		}
		var d *apps.Deployment
		var kinds []string
		for _, o := range objs {
			kinds = append(kinds, o.GetKind())
			if o.GetKind() == "Deployment" {
				d = &apps.Deployment{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d); err != nil {
					t.Fatal(err)
				}
			}
		}
		if d == nil || !slices.Contains(kinds, "ClusterRole") || !slices.Contains(kinds, "ServiceAccount") {
			t.Fatalf("--controller %s: the chart rendered %v, want a Deployment, a ServiceAccount and a ClusterRole", flag, kinds)
		}
		pod := d.Spec.Template.Spec
		container := pod.Containers[0]
		if want := realnode.ControllerImage(c.Metadata.AppVersion).Ref; container.Image != want || container.ImagePullPolicy != "Never" {
			t.Errorf("--controller %s: image %s (pull %s), want %s never pulled", flag, container.Image, container.ImagePullPolicy, want)
		}
		if pod.NodeSelector[realnode.LabelReal] != "true" {
			t.Errorf("--controller %s: node selector %v, want the real nodes", flag, pod.NodeSelector)
		}
		if !slices.Contains(container.Args, "--mode="+mode) || *d.Spec.Replicas != 2 {
			t.Errorf("--controller %s: %d replicas with %v, want 2 with --mode=%s", flag, *d.Spec.Replicas, container.Args, mode)
		}
	}
}
