package scalemodel

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
)

// startProfile starts a CPU profile of the phase to come into s.ProfileDir, when set;
// the function it returns stops it and closes the file.
func startProfile(s Size) (func() error, error) {
	if s.ProfileDir == "" {
		return func() error { return nil }, nil
	}
	if err := os.MkdirAll(s.ProfileDir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(s.ProfileDir, fmt.Sprintf("churn-%d.pprof", s.Nodes)))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
