package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// buildBinary compiles everynode's slim controller binary from repo into out: static
// (no cgo), for Linux on arch, without the sandbox's verbs, symbols stripped and paths
// trimmed so the build is reproducible.
func buildBinary(repo, out, arch string) error {
	abs, err := filepath.Abs(repo)
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-tags", "nosandbox", "-trimpath", "-ldflags", "-s -w", "-o", out, "./cmd/everynode")
	cmd.Dir = abs
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building the controller binary in %s: %w", abs, err)
	}
	return nil
}
