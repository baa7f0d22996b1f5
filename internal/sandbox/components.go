package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// ComponentCommand is the hidden command of this binary that runs a control plane
// component in a child process: `<binary> component <name> <flags...>`.
const ComponentCommand = "component"

// child is a control plane component running in a child process.
type child struct {
	name string
	cmd  *exec.Cmd
	done chan error
	// stateless children keep nothing worth a graceful exit and are killed at once.
	stateless bool
}

// startChild re-executes this binary as component, under name, with its output in
// the sandbox's log directory (logs/<name>.log). The child is killed if this process
// dies.
func startChild(ctx context.Context, p paths, name, component string, args []string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this binary to run %s: %w", name, err)
	}
	logFile, err := os.OpenFile(p.logs(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the log of %s: %w", name, err)
	}
	cmd := exec.Command(self, append([]string{ComponentCommand, component}, args...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan error, 1)}
	go func() {
		c.done <- cmd.Wait()
		logFile.Close()
	}()
	klog.FromContext(ctx).V(2).Info("Started component", "component", name, "pid", cmd.Process.Pid, "args", strings.Join(args, " "))
	return c, nil
}

// stopGrace is how long children get to exit after SIGTERM before they are killed.
const stopGrace = 10 * time.Second

// stopChildren asks every child to exit at once and waits for them, killing those
// still running after stopGrace. Stateless children (the scheduler and the controller
// manager, which take long to drain and lose nothing) are killed outright.
func stopChildren(children []*child) {
	for _, c := range children {
		sig := syscall.SIGTERM
		if c.stateless {
			sig = syscall.SIGKILL
		}
		_ = c.cmd.Process.Signal(sig)
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopGrace)
	defer cancel()
	for _, c := range children {
		select {
		case err := <-c.done:
			c.done <- err
		case <-ctx.Done():
			_ = c.cmd.Process.Kill()
			c.done <- <-c.done
		}
	}
}

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
		"--service-cluster-ip-range=10.96.0.0/16",
		"--cert-dir=" + p.pki("generated"),
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false",
		"--max-requests-inflight=2000",
		"--max-mutating-requests-inflight=1000",
		"--v=0",
	}
}

func schedulerArgs(kubeconfig string) []string {
	return append(clientComponentArgs(kubeconfig), "--kube-api-qps=500", "--kube-api-burst=1000")
}

// controllerManagerControllers are the kube-controller-manager controllers a sandbox
// needs for namespaces, service accounts, garbage collection and node health to work
// as in a real cluster.
var controllerManagerControllers = []string{
	"garbage-collector-controller",
	"pod-garbage-collector-controller",
	"node-lifecycle-controller",
	"namespace-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
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
	return append(clientComponentArgs(kubeconfig), "--use-service-account-credentials=false", "--controllers=daemonset-controller")
}

// clientComponentArgs are the flags every component that talks to the API server
// shares: the admin kubeconfig for everything, no leader election (there is one of
// each) and no serving port of its own.
func clientComponentArgs(kubeconfig string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--v=0",
	}
}
