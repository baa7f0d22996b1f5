package sandbox

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/everynode/everynode/internal/component"
)

// ComponentCommand is the hidden command of this binary that runs a control plane
// component in a child process: `<binary> component <name> <flags...>`.
const ComponentCommand = component.Command

// startChild starts a component under name, with its output in the sandbox's log
// directory (logs/<name>.log). The child is killed if this process dies.
func startChild(ctx context.Context, p paths, name, comp string, args []string) (*component.Child, error) {
	return component.Start(ctx, name, comp, args, p.logs(name))
}

// stopGrace is how long children get to exit after SIGTERM before they are killed.
const stopGrace = 10 * time.Second

// stopChildren asks every child to exit at once and waits for them, killing those
// still running after stopGrace. Stateless children (the scheduler and the controller
// manager, which take long to drain and lose nothing) are killed outright.
func stopChildren(children []*component.Child) { component.StopAll(children, stopGrace) }

// serviceCIDR is the range of Services' cluster IPs; serviceIP, its first address,
// is the kubernetes Service's, where pods reach the API server.
const (
	serviceCIDR = "10.96.0.0/16"
	serviceIP   = "10.96.0.1"
)

// apiserverArgs are kube-apiserver's flags for the sandbox.
func apiserverArgs(cfg Config, p paths, cr credentials, etcdURL string) []string {
	return []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", cfg.Port),
		"--etcd-servers=" + etcdURL,
		"--tls-cert-file=" + cr.certFile,
		"--tls-private-key-file=" + cr.keyFile,
		"--token-auth-file=" + cr.tokenFile,
		"--anonymous-auth=false",
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + cr.saKeyFile,
		"--service-account-signing-key-file=" + cr.saKeyFile,
		"--service-cluster-ip-range=" + serviceCIDR,
		"--cert-dir=" + p.pki("generated"),
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false",
		"--max-requests-inflight=2000",
		"--max-mutating-requests-inflight=1000",
		// Real nodes are reached at their InternalIP, as kubelet reports it; their
		// names resolve nowhere.
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--v=0",
	}
}

func schedulerArgs(kubeconfig string) []string {
	return append(clientComponentArgs(kubeconfig), "--kube-api-qps=500", "--kube-api-burst=1000")
}

// controllerManagerControllers are the kube-controller-manager controllers a sandbox
// needs for namespaces, service accounts, garbage collection and node health to work
// as in a real cluster, for Deployments (everynode's own install chart is one) and
// their PodDisruptionBudgets, and for Jobs (the chart's rollout-status hook is one).
var controllerManagerControllers = []string{
	"garbage-collector-controller",
	"pod-garbage-collector-controller",
	"node-lifecycle-controller",
	"namespace-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"deployment-controller",
	"replicaset-controller",
	"disruption-controller",
	"job-controller",
	// Publishes kube-root-ca.crt in every namespace: a real kubelet mounts it into
	// every pod with a service account token.
	"root-ca-certificate-publisher-controller",
}

// controllerManagerArgs are the flags of the sandbox's kube-controller-manager. It
// gets a generous client rate limit: the node lifecycle controller lifts the
// not-ready taint of every new node, and at the default 20 requests a second a
// thousand nodes would take minutes.
func controllerManagerArgs(cr credentials, kubeconfig string) []string {
	return append(clientComponentArgs(kubeconfig),
		"--use-service-account-credentials=false",
		"--controllers="+strings.Join(controllerManagerControllers, ","),
		"--kube-api-qps=1000",
		"--kube-api-burst=2000",
		"--service-account-private-key-file="+cr.saKeyFile,
		"--root-ca-file="+cr.caFile,
	)
}

// upstreamDaemonSetArgs run kube-controller-manager's DaemonSet controller alone, in a
// process of its own with kube-controller-manager's default client rate limits, so
// it behaves as it does in a stock cluster and its cost can be measured apart.
func upstreamDaemonSetArgs(kubeconfig string) []string {
	return component.UpstreamDaemonSetArgs(kubeconfig)
}

func clientComponentArgs(kubeconfig string) []string { return component.ClientArgs(kubeconfig) }
