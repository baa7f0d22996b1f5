package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/everynode/everynode/internal/component"
)

// TestRBACExampleIsEnough runs the controller with exactly the permissions of
// docs/examples/rbac.yaml (a token of its ServiceAccount), with leader election on,
// through a rollout that marks a revision available and rolls a failed release back:
// every kind of write the controller makes. Nothing may be forbidden.
func TestRBACExampleIsEnough(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sandbox")
	port, err := component.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	_, client := runSandboxNodes(t, dir, port, "none", 2)
	waitSandboxNodes(t, client, 2)
	admin := filepath.Join(dir, "kubeconfig")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(env.binary, append([]string{"kubectl"}, args...)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+admin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("apply", "-f", filepath.Join("..", "..", "docs", "examples", "rbac.yaml"))
	token := run("create", "token", "everynode", "-n", "kube-system", "--duration", "1h")

	cfg, err := clientcmd.LoadFromFile(admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range cfg.AuthInfos {
		auth.Token, auth.ClientCertificateData, auth.ClientKeyData = token, nil, nil
	}
	restricted := filepath.Join(dir, "everynode.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, restricted); err != nil {
		t.Fatal(err)
	}
	ctrl := &controllerProcess{kubeconfig: restricted, logs: filepath.Join(dir, "logs"),
		args: []string{"--leader-elect", "--leader-elect-namespace", "kube-system"}}
	ctrl.start(t)
	t.Cleanup(ctrl.kill)

	ns := "rbac"
	if _, err := client.CoreV1().Namespaces().Create(context.Background(), namespaceObject(ns), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the default service account", func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	ds := daemonSet(ns, "agent", nil)
	ds.Annotations = map[string]string{
		"rollout.everynode.dev/progress-deadline": "5s",
		"rollout.everynode.dev/on-failure":        "rollback",
	}
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

	if _, err := client.CoordinationV1().Leases("kube-system").Get(context.Background(), "everynode", metav1.GetOptions{}); err != nil {
		t.Errorf("the leader election Lease: %v", err)
	}
	ctrl.kill()
	logs, err := os.ReadFile(filepath.Join(dir, "logs", "everynode-controller-1.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(logs), "\n") {
		if strings.Contains(line, "forbidden") {
			t.Errorf("the controller was refused a request: %s", line)
		}
	}
}
