// Package inspect is what everynode's commands for people do against a cluster:
// pause, resume, promote and undo a DaemonSet's rollout, follow it, and explain,
// node by node, what the controller decides. It reads decisions only from
// internal/daemon (the controller's own rules) and talks to the cluster through
// client-go.
package inspect

import (
	"context"
	"errors"
	"fmt"
	"os"

	apps "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Cluster says which cluster and namespace a command works on.
type Cluster struct {
	// Kubeconfig is --kubeconfig; empty for $KUBECONFIG, then Fallback, then
	// ~/.kube/config.
	Kubeconfig string
	// Fallback is the kubeconfig used when neither --kubeconfig nor $KUBECONFIG names
	// one and the file exists: the sandbox's.
	Fallback string
	// Context is --context; empty for the kubeconfig's current context.
	Context string
	// Namespace is -n; empty for the context's namespace, else "default".
	Namespace string
}

// Connect loads the kubeconfig and returns a client and the namespace to work in.
func (c Cluster) Connect() (kubernetes.Interface, string, error) {
	cfg, ns, err := c.Config()
	if err != nil {
		return nil, "", err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("building API client for %s: %v", cfg.Host, err)
	}
	return client, ns, nil
}

// Config loads the kubeconfig: the client configuration and the namespace to work in.
func (c Cluster) Config() (*rest.Config, string, error) {
	cc := c.clientConfig()
	cfg, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, "", errors.New("no kubeconfig: start `everynode sandbox`, set $KUBECONFIG or pass --kubeconfig")
		}
		return nil, "", fmt.Errorf("unusable kubeconfig (%v): check --kubeconfig, --context or $KUBECONFIG", err)
	}
	ns := c.Namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil || ns == "" {
			ns = metav1.NamespaceDefault
		}
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "everynode-cli"
	return cfg, ns, nil
}

// clientConfig applies the loading rules of `everynode kubectl`: --kubeconfig, then
// $KUBECONFIG, then the sandbox's kubeconfig when it exists, then ~/.kube/config.
func (c Cluster) clientConfig() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.Kubeconfig
	if c.Kubeconfig == "" && os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" && c.Fallback != "" {
		if _, err := os.Stat(c.Fallback); err == nil {
			rules.ExplicitPath = c.Fallback
		}
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.Context})
}

// GetDaemonSet reads a DaemonSet, with an error that says how to find the right one.
func GetDaemonSet(ctx context.Context, client kubernetes.Interface, ns, name string) (*apps.DaemonSet, error) {
	ds, err := client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, apiError(err, ns, name)
	}
	return ds, nil
}

// apiError turns an API error about DaemonSet ns/name into one line that says what
// to do.
func apiError(err error, ns, name string) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("DaemonSet %q not found in namespace %q: pass -n NAMESPACE, or list them with `everynode kubectl get daemonsets -A`", name, ns)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%v: your kubeconfig's user needs RBAC permission for this in namespace %q", err, ns)
	case apierrors.IsConflict(err):
		return fmt.Errorf("DaemonSet %s/%s changed while it was being written: run the command again", ns, name)
	case utilnet.IsConnectionRefused(err):
		return fmt.Errorf("cannot reach the Kubernetes API server (%v): is `everynode sandbox` running, or is --kubeconfig/--context right?", err)
	}
	return err
}
