package scalemodel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
)

// Options are a model run over several sizes.
type Options struct {
	Sizes []Size
	// Exe is the everynode binary that runs each size in a process of its own (so
	// each measures its own memory), with Args before the size's flags.
	Exe  string
	Args []string
}

// RunSizes runs each size in a child process (Exe Args --one N ...) in turn and
// returns their results; the children's progress goes to progress.
func RunSizes(ctx context.Context, o Options, progress io.Writer) ([]Result, error) {
	var results []Result
	for i, s := range o.Sizes {
		fmt.Fprintf(progress, "[%d/%d model %d nodes] starting\n", i+1, len(o.Sizes), s.Nodes)
		args := append(append([]string{}, o.Args...), ChildArgs(s)...)
		cmd := exec.CommandContext(ctx, o.Exe, args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, progress
		if err := cmd.Run(); err != nil {
			return results, fmt.Errorf("model at %d nodes: %w", s.Nodes, err)
		}
		var r Result
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			return results, fmt.Errorf("model at %d nodes: reading its result: %w", s.Nodes, err)
		}
		results = append(results, r)
	}
	return results, nil
}

// ChildArgs are the flags that make a child run size s.
func ChildArgs(s Size) []string {
	args := []string{"--one", strconv.Itoa(s.Nodes), "--daemonsets", strconv.Itoa(s.DaemonSets), "--pools", strconv.Itoa(s.Pools),
		"--churn-rate", strconv.Itoa(s.ChurnRate), "--churn-duration", s.ChurnDuration.String(), "--timeout", s.Timeout.String()}
	if s.ProfileDir != "" {
		args = append(args, "--profile-dir", s.ProfileDir)
	}
	return args
}

// RunChild runs one size in this process and writes its result as JSON to out.
func RunChild(ctx context.Context, s Size, out, progress io.Writer) error {
	r, err := Run(ctx, s, func(format string, args ...any) {
		fmt.Fprintf(progress, "  [%d nodes] %s\n", s.Nodes, fmt.Sprintf(format, args...))
	})
	if err != nil {
		return err
	}
	return json.NewEncoder(out).Encode(r)
}

// WriteJSON writes the results to path.
func WriteJSON(path string, results []Result) error {
	data, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
