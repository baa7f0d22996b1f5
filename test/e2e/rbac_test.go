package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestRBACExampleIsEnough runs the controller with exactly the permissions of
// docs/examples/rbac.yaml (a token of its ServiceAccount), with leader election on,
// through a rollout that marks a revision available and rolls a failed release back:
// every kind of write the controller makes. Nothing may be forbidden.
func TestRBACExampleIsEnough(t *testing.T) {
	dir, client, _ := ownSandbox(t, "none", 2)
	adminKubectl(t, dir, "", "apply", "-f", filepath.Join("..", "..", "docs", "examples", "rbac.yaml"))
	token := adminKubectl(t, dir, "", "create", "token", "everynode", "-n", "kube-system", "--duration", "1h")
	ctrl := &controllerProcess{kubeconfig: tokenKubeconfig(t, dir, token), logs: filepath.Join(dir, "logs"),
		args: []string{"--leader-elect", "--leader-elect-namespace", "kube-system"}}
	ctrl.start(t)
	t.Cleanup(ctrl.kill)

	exerciseRollout(t, client, func(ns string) *apps.DaemonSet { return daemonSet(ns, "agent", nil) })
	if _, err := client.CoordinationV1().Leases("kube-system").Get(context.Background(), "everynode", metav1.GetOptions{}); err != nil {
		t.Errorf("the leader election Lease: %v", err)
	}
	ctrl.kill()
	checkNothingForbidden(t, filepath.Join(dir, "logs", "everynode-controller-1.log"))
}

// tokenKubeconfig writes, beside the sandbox in dir, its kubeconfig with the admin's
// credentials replaced by token, and returns its path.
func tokenKubeconfig(t *testing.T, dir, token string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(filepath.Join(dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range cfg.AuthInfos {
		auth.Token, auth.ClientCertificateData, auth.ClientKeyData = token, nil, nil
	}
	path := filepath.Join(dir, "token.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// exerciseRollout drives a DaemonSet made by newDS through every kind of write the
// controller makes: a rollout that marks a revision available, then a release that
// never becomes Ready, failed by the progress deadline and rolled back.
func exerciseRollout(t *testing.T, client kubernetes.Interface, newDS func(ns string) *apps.DaemonSet) {
	t.Helper()
	ns := "rollout"
	createNamespace(t, client, ns)
	ds := newDS(ns)
	if ds.Annotations == nil {
		ds.Annotations = map[string]string{}
	}
	// The deadline leaves a freshly started sandbox time to make the first revision's
	// pods Ready; min-healthy keeps the bake short whatever the deadline.
	ds.Annotations["rollout.everynode.dev/progress-deadline"] = "15s"
	ds.Annotations["rollout.everynode.dev/min-healthy"] = "2s"
	ds.Annotations["rollout.everynode.dev/on-failure"] = "rollback"
	if _, err := client.AppsV1().DaemonSets(ns).Create(context.Background(), ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitProgressing(t, client, ns, "agent", v1.ConditionTrue, "NewRevisionAvailable")
	mutateDaemonSet(t, client, ns, "agent", func(ds *apps.DaemonSet) {
		ds.Spec.Template.Annotations = map[string]string{"sim.everynode.dev/ready": "false"}
	})
	pollUntil(t, "the failed release rolled back", func(ctx context.Context) (bool, error) {
		ds, err := client.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, bad := ds.Spec.Template.Annotations["sim.everynode.dev/ready"]
		return ds.Generation >= 3 && !bad, nil
	})
	waitProgressing(t, client, ns, "agent", v1.ConditionTrue, "NewRevisionAvailable")
	revisions, err := client.AppsV1().ControllerRevisions(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	marked := 0
	for _, r := range revisions.Items {
		if r.Annotations["rollout.everynode.dev/failed"] != "" {
			marked++
		}
	}
	if marked != 1 {
		t.Errorf("%d revisions marked failed, want the rolled-back one", marked)
	}
}

// checkNothingForbidden fails the test for every request the controller's log says
// was refused.
func checkNothingForbidden(t *testing.T, logPath string) {
	t.Helper()
	logs, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(logs), "\n") {
		if strings.Contains(line, "forbidden") {
			t.Errorf("the controller was refused a request: %s", line)
		}
	}
}
