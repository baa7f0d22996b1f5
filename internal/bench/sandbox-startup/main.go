// Command sandbox-startup measures how long an everynode sandbox takes to bring up N
// simulated nodes, all Ready and free of the not-ready taint, and how much memory the
// sandbox's process tree holds then.
//
//	go run ./internal/bench/sandbox-startup --binary bin/everynode --nodes 1000
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/everynode/everynode/internal/nodesim"
)

func main() {
	binary := flag.String("binary", "bin/everynode", "everynode binary")
	nodes := flag.Int("nodes", 100, "simulated nodes")
	port := flag.Int("port", 26443, "API server port")
	flag.Parse()
	if err := run(*binary, *nodes, *port); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-startup:", err)
		os.Exit(1)
	}
}

func run(binary string, nodes, port int) error {
	dir, err := os.MkdirTemp("", "sandbox-startup-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	start := time.Now()
	cmd := exec.Command(binary, "sandbox", "--data-dir", dir, "--port", strconv.Itoa(port), "--nodes", strconv.Itoa(nodes))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	serving := make(chan struct{})
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			if strings.HasPrefix(s.Text(), "sandbox serving") {
				close(serving)
			}
		}
	}()
	select {
	case <-serving:
	case <-time.After(3 * time.Minute):
		return fmt.Errorf("sandbox not serving after 3 minutes")
	}
	apiUp := time.Since(start)
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, nil
		}
		n := 0
		for i := range list.Items {
			if nodesim.Usable(&list.Items[i]) {
				n++
			}
		}
		return n == nodes, nil
	})
	if err != nil {
		return fmt.Errorf("nodes not all Ready: %w", err)
	}
	allReady := time.Since(start)
	time.Sleep(10 * time.Second) // let a full lease interval pass before reading memory
	rss, perProc := treeRSS(cmd.Process.Pid)
	fmt.Printf("nodes=%d api_serving=%.1fs all_nodes_ready=%.1fs rss_total=%dMiB %s\n",
		nodes, apiUp.Seconds(), allReady.Seconds(), rss>>20, perProc)
	return nil
}

// treeRSS sums the resident memory of pid and its children, and describes each.
func treeRSS(pid int) (int64, string) {
	pids := []int{pid}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			pids = append(pids, child)
		}
	}
	var total int64
	var parts []string
	for _, p := range pids {
		rss := statusKB(p, "VmRSS:") << 10
		total += rss
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		args := strings.Split(string(cmdline), "\x00")
		name := "sandbox"
		if len(args) > 2 && args[1] == "component" {
			name = args[2]
		}
		parts = append(parts, fmt.Sprintf("%s=%dMiB", name, rss>>20))
	}
	return total, strings.Join(parts, " ")
}

func statusKB(pid int, key string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, key) {
			f := strings.Fields(line)
			if len(f) >= 2 {
				v, _ := strconv.ParseInt(f[1], 10, 64)
				return v
			}
		}
	}
	return 0
}
