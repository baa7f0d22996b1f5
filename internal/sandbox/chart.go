package sandbox

import (
	"context"
	"fmt"
	"time"

	helmchart "helm.sh/helm/v3/pkg/chart"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/everynode/everynode/charts"
	"github.com/everynode/everynode/internal/chart"
	"github.com/everynode/everynode/internal/controller"
	"github.com/everynode/everynode/internal/realnode"
)

// ChartNamespace and ChartRelease are where and as what --controller chart installs
// everynode; the chart names its Deployment and Lease after the release.
const (
	ChartNamespace = "everynode"
	ChartRelease   = "everynode"
)

// chartReadyTimeout bounds the wait for the chart's Deployment to be available.
const chartReadyTimeout = 3 * time.Minute

// chartMode is the chart's mode for a --controller value; "" when the sandbox
// installs no chart.
func chartMode(controllerFlag string) string {
	switch controllerFlag {
	case ControllerChart:
		return controller.ModeFull
	case ControllerChartCompanion:
		return controller.ModeCompanion
	}
	return ""
}

// loadChart is everynode's chart as this binary embeds it.
func loadChart() (*helmchart.Chart, error) { return chart.Load(charts.Everynode()) }

// chartValues are the values the sandbox installs the chart with: its mode, the
// node gate on (as in the sandbox's own controller), and pods on the real nodes from
// the image the sandbox imported there (tagged with the chart's appVersion, the
// chart's default tag), never pulled.
func chartValues(mode string) map[string]any {
	return map[string]any{
		"mode":         mode,
		"nodeGate":     map[string]any{"enabled": true},
		"image":        map[string]any{"repository": realnode.ControllerRepository, "pullPolicy": string(v1.PullNever)},
		"nodeSelector": map[string]any{realnode.LabelReal: "true"},
	}
}

// installChart installs everynode from its chart in mode into ChartNamespace (again
// on a restart: applying changes only what differs) and waits until its Deployment
// is available: a replica leads, or stands by, with synced caches.
func installChart(ctx context.Context, restCfg *rest.Config, client kubernetes.Interface, mode string) error {
	c, err := loadChart()
	if err != nil {
		return err
	}
	objs, err := chart.Render(c, ChartRelease, ChartNamespace, chartValues(mode))
	if err != nil {
		return err
	}
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ChartNamespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s for the chart: %w", ChartNamespace, err)
	}
	if err := chart.Apply(ctx, restCfg, ChartNamespace, objs); err != nil {
		return fmt.Errorf("installing the chart: %w", err)
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, chartReadyTimeout, true, func(ctx context.Context) (bool, error) {
		d, err := client.AppsV1().Deployments(ChartNamespace).Get(ctx, ChartRelease, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return d.Status.ObservedGeneration >= d.Generation && d.Spec.Replicas != nil &&
			d.Status.UpdatedReplicas == *d.Spec.Replicas && d.Status.AvailableReplicas == *d.Spec.Replicas, nil
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("the chart's Deployment %s/%s was not available within %s: see `everynode kubectl -n %s describe pods`", ChartNamespace, ChartRelease, chartReadyTimeout, ChartNamespace)
	}
	return err
}
