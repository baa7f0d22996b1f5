package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/everynode/everynode/internal/component"
	"github.com/everynode/everynode/internal/nodesim"
)

// Controllers the benchmark compares, in column order.
const (
	Upstream  = "upstream"  // kube-controller-manager's DaemonSet controller
	EveryNode = "everynode" // everynode controller
	// Floor is the floor controller (internal/bench/floorctl): per-node creates and
	// deletes only, no status. Only the churn scenario runs it.
	Floor = "floor"
)

// Sandbox is an `everynode sandbox --controller=none` child process, its data
// directory, and an unthrottled client of the benchmark's own (which talks to the API
// server directly, not through the proxy).
type Sandbox struct {
	Dir        string
	Kubeconfig string
	Config     *rest.Config
	Client     kubernetes.Interface

	cmd    *exec.Cmd
	exited chan struct{}
}

// SandboxOptions configure StartSandbox.
type SandboxOptions struct {
	// Binary is the everynode binary.
	Binary        string
	Dir           string
	Nodes         int
	PodReadyDelay time.Duration
	PodStopDelay  time.Duration
}

// StartSandbox starts a sandbox with no DaemonSet controller in o.Dir and waits
// until every simulated node is Ready and untainted.
func StartSandbox(ctx context.Context, o SandboxOptions) (*Sandbox, error) {
	port, err := component.FreePort()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(o.Dir, "sandbox.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(o.Binary, "sandbox", "--controller=none",
		"--data-dir", o.Dir, "--port", strconv.Itoa(port), "--nodes", strconv.Itoa(o.Nodes),
		"--pod-ready-delay", o.PodReadyDelay.String(), "--pod-stop-delay", o.PodStopDelay.String())
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting the sandbox: %w", err)
	}
	s := &Sandbox{Dir: o.Dir, Kubeconfig: filepath.Join(o.Dir, "kubeconfig"), cmd: cmd, exited: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintln(logFile, sc.Text())
			if strings.HasPrefix(sc.Text(), "sandbox ready") {
				close(ready)
			}
		}
		_ = cmd.Wait()
		logFile.Close()
		close(s.exited)
	}()
	fail := func(err error) (*Sandbox, error) {
		s.Stop()
		return nil, err
	}
	select {
	case <-ready:
	case <-s.exited:
		return fail(fmt.Errorf("the sandbox exited before it was ready; see %s", filepath.Join(o.Dir, "sandbox.log")))
	case <-time.After(3 * time.Minute):
		return fail(fmt.Errorf("the sandbox was not ready after 3 minutes; see %s", filepath.Join(o.Dir, "sandbox.log")))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	if s.Config, err = clientcmd.BuildConfigFromFlags("", s.Kubeconfig); err != nil {
		return fail(err)
	}
	s.Config.QPS, s.Config.Burst = -1, 0
	s.Config.UserAgent = "everynode-bench"
	// Protobuf, as the controllers: in JSON the benchmark's watches cost the API
	// server a second encoding of every pod and node event, and the benchmark a
	// slower decoding of each, which at thousands of nodes is not small.
	s.Config.ContentType = runtime.ContentTypeProtobuf
	s.Config.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	if s.Client, err = kubernetes.NewForConfig(s.Config); err != nil {
		return fail(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-s.exited:
			return false, fmt.Errorf("the sandbox exited; see %s", filepath.Join(o.Dir, "sandbox.log"))
		default:
		}
		list, err := s.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, nil
		}
		n := 0
		for i := range list.Items {
			if nodesim.Usable(&list.Items[i]) {
				n++
			}
		}
		return n >= o.Nodes, nil
	})
	if err != nil {
		return fail(fmt.Errorf("waiting for %d nodes to be Ready: %w", o.Nodes, err))
	}
	return s, nil
}

// Pid is the sandbox process's id (etcd and the node simulator run in it).
func (s *Sandbox) Pid() int { return s.cmd.Process.Pid }

// APIServerPid is the pid of the sandbox's kube-apiserver, or 0.
func (s *Sandbox) APIServerPid() int {
	return findChild(s.Pid(), component.Command, "kube-apiserver")
}

// Stop stops the sandbox and waits for it (and so its children) to exit.
func (s *Sandbox) Stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(time.Minute):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// StartProxy starts a counting proxy in front of the sandbox's API server, serving
// with the API server's own certificate, and writes a kubeconfig that points at it.
func (s *Sandbox) StartProxy(kubeconfigPath string) (*Proxy, error) {
	return StartProxy(s.Dir, kubeconfigPath)
}

// StartProxy starts a counting proxy in front of the API server of the sandbox whose
// data directory is dir, serving with the API server's own certificate, and writes
// to kubeconfigPath the sandbox's kubeconfig pointed at the proxy.
func StartProxy(dir, kubeconfigPath string) (*Proxy, error) {
	cfg, err := clientcmd.LoadFromFile(filepath.Join(dir, "kubeconfig"))
	if err != nil {
		return nil, err
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok || cfg.Clusters[ctx.Cluster] == nil {
		return nil, fmt.Errorf("the sandbox kubeconfig in %s has no current cluster", dir)
	}
	cluster := cfg.Clusters[ctx.Cluster]
	server, err := url.Parse(cluster.Server)
	if err != nil {
		return nil, err
	}
	caPEM := cluster.CertificateAuthorityData
	if len(caPEM) == 0 {
		if caPEM, err = os.ReadFile(cluster.CertificateAuthority); err != nil {
			return nil, fmt.Errorf("reading the sandbox's CA certificate: %w", err)
		}
	}
	tr, err := NewTLSTransport(caPEM)
	if err != nil {
		return nil, err
	}
	p := NewProxy(server, tr)
	pki := filepath.Join(dir, "pki")
	addr, err := p.ListenTLS(filepath.Join(pki, "apiserver.crt"), filepath.Join(pki, "apiserver.key"))
	if err != nil {
		return nil, err
	}
	for _, c := range cfg.Clusters {
		c.Server = addr
	}
	if err := clientcmd.WriteToFile(*cfg, kubeconfigPath); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// ControllerProcess is a DaemonSet controller under test, in a process of its own.
type ControllerProcess struct {
	Name   string
	pid    int
	stop   func()
	exited <-chan struct{}
	log    string
}

// Pid is the controller's process id.
func (c *ControllerProcess) Pid() int { return c.pid }

// Exited is closed once the controller process has exited.
func (c *ControllerProcess) Exited() <-chan struct{} { return c.exited }

// Log is the path of the controller's log.
func (c *ControllerProcess) Log() string { return c.log }

// Stop kills the controller and waits for it to exit.
func (c *ControllerProcess) Stop() { c.stop() }

// StartController starts the named controller against kubeconfig with the given
// client rate limit (qps <= 0: none). kube-controller-manager's DaemonSet controller
// runs through the component machinery the sandbox uses for --controller=upstream;
// everynode's as `everynode controller`. Both sync two DaemonSets at a time (their
// defaults) and neither elects a leader. The floor controller runs as `everynode
// floor-controller`, 16 nodes at a time. A non-empty pprofAddr makes everynode or the
// floor serve Go's profiles there (upstream's is not profiled); everynodeArgs are
// added to everynode's command line.
func StartController(ctx context.Context, name, binary, kubeconfig string, qps float32, burst int, logPath, pprofAddr string, everynodeArgs []string) (*ControllerProcess, error) {
	q := strconv.FormatFloat(float64(qps), 'f', -1, 32)
	if qps <= 0 {
		q = "-1" // both read a negative QPS as no client-side limit
	}
	b := strconv.Itoa(burst)
	switch name {
	case Upstream:
		args := append(component.UpstreamDaemonSetArgs(kubeconfig), "--kube-api-qps="+q, "--kube-api-burst="+b)
		child, err := component.Start(ctx, "daemonset-controller", "kube-controller-manager", args, logPath)
		if err != nil {
			return nil, err
		}
		child.Stateless = true
		return &ControllerProcess{Name: name, pid: child.Pid(), exited: child.Exited(), log: logPath,
			stop: func() { component.StopAll([]*component.Child{child}, 10*time.Second) }}, nil
	case EveryNode:
		metricsAddr := "0" // nothing served
		if pprofAddr != "" {
			metricsAddr = pprofAddr
		}
		args := []string{"controller", "--kubeconfig", kubeconfig, "--kube-api-qps", q, "--kube-api-burst", b,
			"--leader-elect=false", "--metrics-addr", metricsAddr,
			// The benchmark's sandbox runs no other DaemonSet controller: no probe
			// for one, which would hold everynode's first writes back.
			"--conflict-probe-timeout=0"}
		if pprofAddr != "" {
			args = append(args, "--profiling")
		}
		args = append(args, everynodeArgs...)
		return startChild(binary, logPath, name, args...)
	case Floor:
		args := []string{"floor-controller", "--kubeconfig", kubeconfig, "--kube-api-qps", q, "--kube-api-burst", b}
		if pprofAddr != "" {
			args = append(args, "--profiling-addr", pprofAddr)
		}
		return startChild(binary, logPath, name, args...)
	}
	return nil, fmt.Errorf("unknown controller %q", name)
}

// startChild runs binary with args as the controller name, its output to logPath.
func startChild(binary, logPath, name string, args ...string) (*ControllerProcess, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logFile.Close(); close(exited) }()
	return &ControllerProcess{Name: name, pid: cmd.Process.Pid, exited: exited, log: logPath,
		stop: func() { _ = cmd.Process.Kill(); <-exited }}, nil
}

// waitControllerReady waits until the controller has opened its watches of
// DaemonSets, ControllerRevisions, pods and nodes through the proxy, then settle
// longer for the caches to fill.
func waitControllerReady(ctx context.Context, c *ControllerProcess, p *Proxy, settle time.Duration) error {
	need := []string{"daemonsets", "controllerrevisions", "pods", "nodes"}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		select {
		case <-c.Exited():
			return false, fmt.Errorf("the %s controller exited; see %s", c.Name, c.Log())
		default:
		}
		counts := p.Snapshot()
		for _, r := range need {
			if counts.Get("watch", r).Requests == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the %s controller to watch the API: %w", c.Name, err)
	}
	select {
	case <-time.After(settle):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
