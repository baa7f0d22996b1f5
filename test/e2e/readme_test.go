package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/everynode/everynode/internal/sandbox"
)

// repoRoot is the repository this test runs in (test/e2e is two levels down).
const repoRoot = "../.."

// readmeSection is the README section whose commands TestReadmeWalkthrough runs.
const readmeSection = "## Try it: the sandbox"

// TestReadmeWalkthrough does what the README tells a new user to do, word for word:
// in a fresh copy of the repository, the section's first command starts the sandbox
// with every default (its data dir, its port) and the commands after it run, from
// the same directory, once it prints "sandbox ready". Then every simulated node
// must have a Running pod of the example DaemonSet, as the README promises.
func TestReadmeWalkthrough(t *testing.T) {
	commands := readmeCommands(t, filepath.Join(repoRoot, "README.md"), readmeSection)
	if len(commands) < 2 {
		t.Fatalf("the README's %q section has %d commands; want the sandbox's and at least one after it", readmeSection, len(commands))
	}
	if err := checkPortFree(sandbox.DefaultConfig().Port); err != nil {
		t.Fatalf("the README's sandbox needs port %d: %v", sandbox.DefaultConfig().Port, err)
	}
	clone := copyRepository(t)

	start := userShell(context.Background(), clone, commands[0])
	// The first build in a copy recompiles everynode's own packages and relinks.
	sb, err := startSandboxProcess(start, "readme sandbox: ", 15*time.Minute)
	if err != nil {
		t.Fatalf("the README's %q: %v; logs in %s", commands[0], err, filepath.Join(clone, ".everynode", "sandbox", "logs"))
	}
	t.Cleanup(sb.stop)

	var last string
	for _, command := range commands[1:] {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		out, err := userShell(ctx, clone, command).CombinedOutput()
		cancel()
		t.Logf("$ %s\n%s", command, out)
		if err != nil {
			t.Fatalf("the README's %q failed (%v):\n%s", command, err, out)
		}
		last = string(out)
	}
	if !sb.alive() {
		t.Fatal("the sandbox exited while the README's commands ran")
	}

	// The README's last command lists the pods: one Running on each simulated node.
	client := kubeconfigClient(t, sandbox.Kubeconfig(filepath.Join(clone, sandbox.DefaultConfig().DataDir)))
	nodes, err := client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != sandbox.DefaultConfig().Sim.Nodes {
		t.Errorf("the README's sandbox has %d nodes, want its default %d", len(nodes.Items), sandbox.DefaultConfig().Sim.Nodes)
	}
	for _, node := range nodes.Items {
		if !listsRunningPodOn(last, node.Name) {
			t.Errorf("the README's last command shows no Running pod on %s:\n%s", node.Name, last)
		}
	}
}

// readmeCommands returns the commands of a README section: its indented code lines,
// without trailing comments.
func readmeCommands(t *testing.T, path, section string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var commands []string
	in := false
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		line := scanner.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == section
			continue
		}
		if !in || !strings.HasPrefix(line, "    ") {
			continue
		}
		command, _, _ := strings.Cut(strings.TrimSpace(line), " #")
		if command = strings.TrimSpace(command); command != "" {
			commands = append(commands, command)
		}
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	return commands
}

// copyRepository copies what a fresh clone holds — the files git tracks, and new
// ones it does not ignore — into a temporary directory.
func copyRepository(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "everynode")
	for _, name := range repositoryFiles(t) {
		if err := copyFile(filepath.Join(repoRoot, name), filepath.Join(dst, name)); err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the work tree, not yet in git
			}
			t.Fatal(err)
		}
	}
	return dst
}

// repositoryFiles lists the files of the repository, relative to its root: those git
// tracks and the new ones it does not ignore, or, outside a git checkout, every file
// but those of .git, bin and .everynode (what .gitignore leaves out).
func repositoryFiles(t *testing.T) []string {
	t.Helper()
	if out, err := exec.Command("git", "-C", repoRoot, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output(); err == nil {
		return strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	}
	var files []string
	err := filepath.WalkDir(repoRoot, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		if d.IsDir() && (rel == ".git" || rel == "bin" || rel == ".everynode") {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() && !strings.HasSuffix(rel, ".test") {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("listing the repository's files: %v", err)
	}
	return files
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// userShell runs command in dir through sh, in an environment with none of the
// variables that would point everynode elsewhere than its defaults.
func userShell(ctx context.Context, dir, command string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name != "KUBECONFIG" && name != "EVERYNODE_DATA_DIR" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return cmd
}

// listsRunningPodOn reports whether `kubectl get pods -o wide` output has a
// Running pod on node.
func listsRunningPodOn(table, node string) bool {
	for _, line := range strings.Split(table, "\n") {
		fields := strings.Fields(line)
		running, onNode := false, false
		for _, f := range fields {
			running = running || f == "Running"
			onNode = onNode || f == node
		}
		if running && onNode {
			return true
		}
	}
	return false
}

func kubeconfigClient(t *testing.T, path string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("loading %s: %v", path, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// checkPortFree fails when something listens on port on 127.0.0.1.
func checkPortFree(port int) error {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return err
	}
	return l.Close()
}
