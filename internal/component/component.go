// Package component runs an upstream component (kube-apiserver, kube-scheduler,
// kube-controller-manager, or a real node's kubelet) in a child process of this binary,
// re-executed through its hidden "component" command, so that each keeps its own
// flags, signal handling and global registries. The sandbox starts its control plane
// with it, and the benchmark starts kube-controller-manager's DaemonSet controller
// with it. It links nothing of the control plane itself.
package component

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

// Command is the hidden command of this binary that runs a control plane
// component in a child process: `<binary> component <name> <flags...>`.
const Command = "component"

// Child is a control plane component running in a child process.
type Child struct {
	// Name names the child in logs and errors.
	Name string
	// Stateless children keep nothing worth a graceful exit and are killed at once
	// by StopAll.
	Stateless bool

	cmd    *exec.Cmd
	exited chan struct{}
	err    error // set before exited is closed
}

// Start re-executes this binary as component, under name, with its output appended
// to logPath. The child is killed if this process dies.
func Start(ctx context.Context, name, component string, args []string, logPath string) (*Child, error) {
	self, err := Self()
	if err != nil {
		return nil, fmt.Errorf("finding this binary to run %s: %w", name, err)
	}
	cmd := exec.Command(self, append([]string{Command, component}, args...)...)
	// The child is named after its component: client-go derives the user agent, and
	// the API server the field manager of every write, from the program's name, so
	// kube-controller-manager's writes are recorded as kube-controller-manager's, as
	// in a real cluster, not as this binary's.
	cmd.Args[0] = component
	return StartCommand(ctx, name, cmd, logPath)
}

// Self is the path of this binary, which runs every component.
func Self() (string, error) { return os.Executable() }

// StartCommand starts cmd as a child under name, with its output appended to
// logPath. The child is killed if this process dies.
func StartCommand(ctx context.Context, name string, cmd *exec.Cmd, logPath string) (*Child, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the log of %s: %w", name, err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	c := &Child{Name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		logFile.Close()
		close(c.exited)
	}()
	klog.FromContext(ctx).V(2).Info("Started component", "component", name, "pid", cmd.Process.Pid, "args", strings.Join(cmd.Args[1:], " "))
	return c, nil
}

// Pid is the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Exited is closed once the child has exited; Err then says how.
func (c *Child) Exited() <-chan struct{} { return c.exited }

// Err is how the child exited (nil for a clean exit); valid once Exited is closed.
func (c *Child) Err() error {
	<-c.exited
	return c.err
}

// StopAll asks every child to exit at once and waits for them, killing those still
// running after grace. Stateless children are killed outright.
func StopAll(children []*Child, grace time.Duration) {
	for _, c := range children {
		sig := syscall.SIGTERM
		if c.Stateless {
			sig = syscall.SIGKILL
		}
		_ = c.cmd.Process.Signal(sig)
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	for _, c := range children {
		select {
		case <-c.exited:
		case <-ctx.Done():
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
	}
}

// UpstreamDaemonSetArgs run kube-controller-manager's DaemonSet controller alone, in
// a process of its own, talking to the API server of kubeconfig. With no extra flags
// it has kube-controller-manager's default client rate limits (20 requests a second,
// bursts of 30), so it behaves as it does in a stock cluster; append
// --kube-api-qps/--kube-api-burst to change them (a negative QPS lifts the limit).
func UpstreamDaemonSetArgs(kubeconfig string) []string {
	return append(ClientArgs(kubeconfig), "--use-service-account-credentials=false", "--controllers=daemonset-controller")
}

// ClientArgs are the flags every component that talks to the API server shares: the
// kubeconfig for everything, no leader election (there is one of each) and no
// serving port of its own.
func ClientArgs(kubeconfig string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--v=0",
	}
}
