// Package sandboxpath says where a sandbox keeps its files, for the sandbox itself
// and for the commands that find its kubeconfig (everynode kubectl, rollout,
// explain). It links nothing of the sandbox, so the controller's slim build can use it.
package sandboxpath

import (
	"os"
	"path/filepath"
)

// DefaultDataDir is the sandbox's --data-dir by default, relative to the directory it
// is started in.
var DefaultDataDir = filepath.Join(".everynode", "sandbox")

// DataDirEnv names the environment variable that points the commands at a sandbox
// started with another --data-dir.
const DataDirEnv = "EVERYNODE_DATA_DIR"

// Kubeconfig is where the admin kubeconfig of a sandbox in dir is written.
func Kubeconfig(dir string) string { return filepath.Join(dir, "kubeconfig") }

// FallbackKubeconfig is the absolute path of the kubeconfig of the sandbox in
// $EVERYNODE_DATA_DIR, else in DefaultDataDir under the working directory; "" when
// the working directory cannot be read.
func FallbackKubeconfig() string {
	dir := os.Getenv(DataDirEnv)
	if dir == "" {
		dir = DefaultDataDir
	}
	path, err := filepath.Abs(Kubeconfig(dir))
	if err != nil {
		return ""
	}
	return path
}
