package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/everynode/everynode/charts"
	"github.com/everynode/everynode/internal/chart"
	"github.com/everynode/everynode/internal/component"
)

// renderChart renders charts/everynode as the sandbox does (internal/chart, Helm's
// own library) for a release in namespace with the given values, and returns it as
// one manifest.
func renderChart(t *testing.T, namespace string, values map[string]any) string {
	t.Helper()
	c, err := chart.Load(charts.Everynode())
	if err != nil {
		t.Fatal(err)
	}
	objs, err := chart.Render(c, "everynode", namespace, values)
	if err != nil {
		t.Fatalf("rendering the chart (%v): %v", values, err)
	}
	var docs []string
	for _, o := range objs {
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	return strings.Join(docs, "---\n")
}

// renderedDeployment is the Deployment of a rendered manifest.
func renderedDeployment(t *testing.T, manifest string) *apps.Deployment {
	t.Helper()
	for _, doc := range strings.Split(manifest, "\n---") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil || meta.Kind != "Deployment" {
			continue
		}
		var d apps.Deployment
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
			t.Fatalf("decoding the rendered Deployment: %v", err)
		}
		return &d
	}
	t.Fatalf("the chart rendered no Deployment:\n%s", manifest)
	return nil
}

// TestChartInstallsEachMode installs the chart, rendered for each mode, into a
// sandbox of the kind that mode is for — no DaemonSet controller of the cluster's
// own for full mode, kube-controller-manager's for companion mode — then runs
// everynode as the chart's Deployment would (its container's arguments, its
// ServiceAccount's token, its namespace) through a rollout that writes everything
// the mode writes: revision marks, a failed release rolled back. Nothing may be
// forbidden, and the chart's Deployment itself must come up.
func TestChartInstallsEachMode(t *testing.T) {
	for _, tc := range []struct {
		mode, sandboxController string
		daemonSet               func(ns string) *apps.DaemonSet
	}{
		{mode: "full", sandboxController: "none", daemonSet: func(ns string) *apps.DaemonSet { return daemonSet(ns, "agent", nil) }},
		{mode: "companion", sandboxController: "upstream", daemonSet: func(ns string) *apps.DaemonSet { return companionDaemonSet(ns, nil) }},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			releaseNS := "everynode-" + tc.mode
			manifest := renderChart(t, releaseNS, map[string]any{"mode": tc.mode, "image": map[string]any{"tag": "e2e"}})
			dir, client, _ := ownSandbox(t, tc.sandboxController, 2)
			if _, err := client.CoreV1().Namespaces().Create(context.Background(), namespaceObject(releaseNS), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			adminKubectl(t, dir, manifest, "apply", "-f", "-")

			// The chart's own Deployment comes up (the simulated kubelet runs its
			// pods): its spec passes admission and scheduling.
			pollUntil(t, "the chart's Deployment available", func(ctx context.Context) (bool, error) {
				d, err := client.AppsV1().Deployments(releaseNS).Get(ctx, "everynode", metav1.GetOptions{})
				return err == nil && d.Status.AvailableReplicas == *d.Spec.Replicas, nil
			})

			deploy := renderedDeployment(t, manifest)
			container := deploy.Spec.Template.Spec.Containers[0]
			args := make([]string, 0, len(container.Args))
			metrics, err := component.FreePort()
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range container.Args {
				if strings.HasPrefix(a, "--metrics-addr=") {
					a = fmt.Sprintf("--metrics-addr=127.0.0.1:%d", metrics) // the container's port, here on loopback
				}
				args = append(args, a)
			}
			if args[0] != "controller" {
				t.Fatalf("the chart's container runs %v, want the controller", container.Args)
			}
			token := adminKubectl(t, dir, "", "create", "token", deploy.Spec.Template.Spec.ServiceAccountName, "-n", releaseNS, "--duration", "1h")
			ctrl := &controllerProcess{kubeconfig: tokenKubeconfig(t, dir, token), logs: filepath.Join(dir, "logs"), args: args[1:],
				env: []string{"POD_NAMESPACE=" + releaseNS}}
			ctrl.start(t)
			t.Cleanup(ctrl.kill)
			waitHealthy(t, metrics)
			checkMetricsAuth(t, dir, releaseNS, metrics, deploy.Spec.Template.Spec.ServiceAccountName)

			exerciseRollout(t, client, tc.daemonSet)
			if _, err := client.CoordinationV1().Leases(releaseNS).Get(context.Background(), "everynode", metav1.GetOptions{}); err != nil {
				t.Errorf("the leader election Lease in the release's namespace: %v", err)
			}
			ctrl.kill()
			checkNothingForbidden(t, filepath.Join(dir, "logs", "everynode-controller-1.log"))
		})
	}
}

// adminKubectl runs `everynode kubectl` as the admin of the sandbox in dir, with
// stdin, and returns its output.
func adminKubectl(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(env.binary, append([]string{"kubectl"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(dir, "kubeconfig"))
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// checkMetricsAuth checks the chart's guard on /metrics (--metrics-auth): no token,
// 401; a token of a user without the permission (the controller's own
// ServiceAccount), 403; a ServiceAccount bound to the chart's metrics-reader
// ClusterRole, and the cluster's admin, 200. /healthz needs no token.
func checkMetricsAuth(t *testing.T, dir, releaseNS string, port int, controllerSA string) {
	t.Helper()
	adminKubectl(t, dir, "", "create", "serviceaccount", "scraper", "-n", releaseNS)
	adminKubectl(t, dir, "", "create", "clusterrolebinding", "scraper-"+releaseNS, "--clusterrole=everynode-metrics-reader",
		"--serviceaccount="+releaseNS+":scraper")
	token := func(sa string) string {
		return adminKubectl(t, dir, "", "create", "token", sa, "-n", releaseNS, "--duration", "10m")
	}
	cfg, err := clientcmd.LoadFromFile(filepath.Join(dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	var adminToken string
	for _, auth := range cfg.AuthInfos {
		adminToken = auth.Token
	}
	for _, tc := range []struct {
		who, path, token string
		want             int
	}{
		{who: "no token", path: "/metrics", want: http.StatusUnauthorized},
		{who: "a bad token", path: "/metrics", token: "not-a-token", want: http.StatusUnauthorized},
		{who: "the controller's ServiceAccount", path: "/metrics", token: token(controllerSA), want: http.StatusForbidden},
		{who: "a ServiceAccount bound to metrics-reader", path: "/metrics", token: token("scraper"), want: http.StatusOK},
		{who: "the admin", path: "/metrics", token: adminToken, want: http.StatusOK},
		{who: "no token", path: "/healthz", want: http.StatusOK},
	} {
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", port, tc.path), nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("GET %s with %s: %d, want %d", tc.path, tc.who, resp.StatusCode, tc.want)
		}
	}
}

// waitHealthy waits until the controller answers /healthz on port.
func waitHealthy(t *testing.T, port int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("the controller never answered /healthz on port %d", port)
	}
}
