package realnode

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// InitCommand is the name, under this binary's hidden component command, of the step
// that places a real node's process before it runs: `<binary> component node-init
// --cgroup REL [--tmpfs DIR]... [--argv0 NAME] -- PROGRAM ARGS...`. It runs inside the
// node's network and mount namespaces (entered with nsenter), moves itself into the
// cgroup REL of every hierarchy, mounts a fresh tmpfs on each DIR (visible to this
// mount namespace only) and then becomes PROGRAM.
const InitCommand = "node-init"

// Init runs the node-init step with its arguments; it returns only on failure.
func Init(args []string) error {
	fs := flag.NewFlagSet(InitCommand, flag.ContinueOnError)
	cgroup := fs.String("cgroup", "", "the cgroup to join, as a path from each hierarchy's root")
	argv0 := fs.String("argv0", "", "the name PROGRAM runs under (default: PROGRAM)")
	var tmpfs []string
	fs.Func("tmpfs", "a directory to mount a fresh tmpfs on (repeatable)", func(dir string) error {
		tmpfs = append(tmpfs, dir)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	argv := fs.Args()
	if *cgroup == "" || len(argv) == 0 {
		return fmt.Errorf("usage: %s --cgroup REL [--tmpfs DIR]... [--argv0 NAME] -- PROGRAM ARGS", InitCommand)
	}
	if err := joinCgroup(*cgroup, os.Getpid()); err != nil {
		return err
	}
	for _, dir := range tmpfs {
		if err := os.MkdirAll(dir, 0o711); err != nil {
			return err
		}
		if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "mode=0711"); err != nil {
			return fmt.Errorf("mounting a tmpfs on %s: %w", dir, err)
		}
	}
	program, err := exec.LookPath(argv[0])
	if err != nil {
		return err
	}
	if *argv0 != "" {
		argv[0] = *argv0
	}
	if err := syscall.Exec(program, argv, os.Environ()); err != nil {
		return fmt.Errorf("running %s: %w", strings.Join(argv, " "), err)
	}
	return nil
}
