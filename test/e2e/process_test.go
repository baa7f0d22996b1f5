package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// sandboxProcess is a sandbox started as a user starts one: a command (everynode
// sandbox, or make sandbox) in a process group of its own.
type sandboxProcess struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// startSandboxProcess starts cmd, echoes its output to stderr under prefix, and
// waits up to readyWithin for the line "sandbox ready". The process and its children
// are stopped with stop.
func startSandboxProcess(cmd *exec.Cmd, prefix string, readyWithin time.Duration) (*sandboxProcess, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = prefixWriter{prefix}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &sandboxProcess{cmd: cmd, exited: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		scanner := bufio.NewScanner(stdout)
		announced := false
		for scanner.Scan() {
			line := scanner.Text()
			fmt.Fprintln(os.Stderr, prefix+line)
			if !announced && strings.HasPrefix(line, "sandbox ready") {
				announced = true
				close(ready)
			}
		}
		_ = cmd.Wait()
		close(p.exited)
	}()
	select {
	case <-ready:
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("%s exited before it was ready (%v)", strings.Join(cmd.Args, " "), cmd.ProcessState)
	case <-time.After(readyWithin):
		p.stop()
		return nil, fmt.Errorf("%s not ready within %s", strings.Join(cmd.Args, " "), readyWithin)
	}
}

// alive reports whether the sandbox is still running.
func (p *sandboxProcess) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM to the sandbox's process group, as Ctrl-C in a terminal would,
// and kills the group if it has not exited within 30 seconds.
func (p *sandboxProcess) stop() {
	pgid := -p.cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-p.exited
	}
}

// prefixWriter writes to stderr, each write under a prefix.
type prefixWriter struct{ prefix string }

func (w prefixWriter) Write(b []byte) (int, error) {
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line != "" {
			fmt.Fprint(os.Stderr, w.prefix+line)
		}
	}
	return len(b), nil
}
