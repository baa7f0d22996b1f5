package sandbox

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// A kubeconfig written into a relative data dir works when read from any working
// directory: it names no file by a path that depends on where it is read from.
func TestKubeconfigWorksFromAnyDirectory(t *testing.T) {
	root := t.TempDir()
	t.Chdir(root)
	p := paths{filepath.Join("state", "sandbox")} // relative, as the default is
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cr, err := ensureCredentials(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeKubeconfig(Kubeconfig(p.dir), "https://127.0.0.1:6443", cr); err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(cr.caFile)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(root, "elsewhere", "deeper")
	if err := os.MkdirAll(elsewhere, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Chdir(elsewhere)
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(root, Kubeconfig(p.dir)))
	if err != nil {
		t.Fatalf("loading the kubeconfig from another directory: %v", err)
	}
	if cfg.CAFile != "" {
		t.Errorf("the kubeconfig names its CA by path %q", cfg.CAFile)
	}
	if !bytes.Equal(cfg.CAData, ca) {
		t.Errorf("the kubeconfig does not embed the sandbox's CA certificate")
	}
	if cfg.BearerToken != cr.token || cfg.Host != "https://127.0.0.1:6443" {
		t.Errorf("kubeconfig has host %q token %q, want the sandbox's", cfg.Host, cfg.BearerToken)
	}
}
