package inspect

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// writeKubeconfig writes a kubeconfig whose current context talks to server in
// namespace team, with a second context "other" without a namespace.
func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "` + server + `"}
users:
- name: u
  user: {token: t}
contexts:
- name: main
  context: {cluster: c, user: u, namespace: team}
- name: other
  context: {cluster: c, user: u}
current-context: main
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestClusterConfig(t *testing.T) {
	sandbox := writeKubeconfig(t, "https://sandbox:6443")
	env := writeKubeconfig(t, "https://env:6443")
	flag := writeKubeconfig(t, "https://flag:6443")
	missing := filepath.Join(t.TempDir(), "none")
	for _, tc := range []struct {
		name             string
		env              string
		cluster          Cluster
		wantHost, wantNS string
	}{
		{"the sandbox's without $KUBECONFIG", "", Cluster{Fallback: sandbox}, "https://sandbox:6443", "team"},
		{"$KUBECONFIG before the sandbox's", env, Cluster{Fallback: sandbox}, "https://env:6443", "team"},
		{"--kubeconfig before all", env, Cluster{Kubeconfig: flag, Fallback: sandbox}, "https://flag:6443", "team"},
		{"-n", "", Cluster{Fallback: sandbox, Namespace: "ops"}, "https://sandbox:6443", "ops"},
		{"--context", "", Cluster{Fallback: sandbox, Context: "other"}, "https://sandbox:6443", "default"},
		{"a missing sandbox is skipped", env, Cluster{Fallback: missing}, "https://env:6443", "team"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(clientcmd.RecommendedConfigPathEnvVar, tc.env)
			cfg, ns, err := tc.cluster.Config()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.wantHost || ns != tc.wantNS {
				t.Errorf("got %s in %s, want %s in %s", cfg.Host, ns, tc.wantHost, tc.wantNS)
			}
		})
	}
}

func TestClusterConfigErrors(t *testing.T) {
	t.Setenv(clientcmd.RecommendedConfigPathEnvVar, "")
	if _, err := os.Stat(clientcmd.RecommendedHomeFile); err == nil {
		t.Skip("~/.kube/config exists")
	}
	_, _, err := Cluster{Fallback: filepath.Join(t.TempDir(), "none")}.Config()
	if err == nil || err.Error() != "no kubeconfig: start `everynode sandbox`, set $KUBECONFIG or pass --kubeconfig" {
		t.Errorf("without any kubeconfig: %v", err)
	}
	_, _, err = Cluster{Fallback: writeKubeconfig(t, "https://sandbox:6443"), Context: "nope"}.Config()
	if err == nil || !strings.Contains(err.Error(), `context "nope" does not exist`) || !strings.Contains(err.Error(), "check --kubeconfig, --context") {
		t.Errorf("unknown context: %v", err)
	}
}
