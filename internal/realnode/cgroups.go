package realnode

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupMountRoot is where the cgroup hierarchies are mounted.
const cgroupMountRoot = "/sys/fs/cgroup"

// hierarchies are the mount points of the cgroup v1 hierarchies (cpu, memory, ...,
// named ones such as name=systemd, and the cgroup2 hierarchy that hybrid hosts mount
// at /sys/fs/cgroup/unified, where runc places containers too), from
// /proc/self/mountinfo.
func hierarchies() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mounts []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		// 35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
		fields := strings.Fields(s.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(fields) || len(fields) < 5 {
			continue
		}
		fstype := fields[sep+1]
		if (fstype == "cgroup" || fstype == "cgroup2") && strings.HasPrefix(fields[4], cgroupMountRoot+"/") {
			mounts = append(mounts, fields[4])
		}
	}
	return mounts, s.Err()
}

func cgroupV1() bool {
	h, err := hierarchies()
	return err == nil && len(h) > 0
}

// createCgroup creates the cgroup at rel (a path from each hierarchy's root) in every
// hierarchy. A new cpuset cgroup starts with no CPUs and no memory nodes in cgroup
// v1, which would keep any process out: each new level inherits its parent's.
func createCgroup(rel string) error {
	mounts, err := hierarchies()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		dir := m
		for _, part := range strings.Split(strings.Trim(rel, "/"), "/") {
			parent := dir
			dir = filepath.Join(dir, part)
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("creating cgroup %s: %w", dir, err)
			}
			for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
				if err := inherit(parent, dir, file); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// inherit copies a cgroup file's value from parent to dir when dir's is empty; a
// hierarchy without the file is left alone.
func inherit(parent, dir, file string) error {
	own, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil || strings.TrimSpace(string(own)) != "" {
		return nil
	}
	value, err := os.ReadFile(filepath.Join(parent, file))
	if err != nil {
		return nil
	}
	if err := os.WriteFile(filepath.Join(dir, file), value, 0o644); err != nil {
		return fmt.Errorf("setting %s of cgroup %s: %w", file, dir, err)
	}
	return nil
}

// joinCgroup moves the process pid into the cgroup at rel in every hierarchy.
func joinCgroup(rel string, pid int) error {
	mounts, err := hierarchies()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		path := filepath.Join(m, rel, "cgroup.procs")
		if err := os.WriteFile(path, []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("moving process %d into %s: %w", pid, path, err)
		}
	}
	return nil
}

// removeCgroup kills every process in the cgroup at rel and below, in every
// hierarchy, until none is left, then removes the cgroups, and their parents up to
// the hierarchy's root where they are empty. A cgroup that does not exist is done.
func removeCgroup(ctx context.Context, rel string) error {
	mounts, err := hierarchies()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		pids := 0
		for _, m := range mounts {
			for _, dir := range subtree(filepath.Join(m, rel)) {
				for _, pid := range procs(dir) {
					pids++
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		if pids == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("processes of cgroup %s still running after SIGKILL", rel)
		case <-time.After(50 * time.Millisecond):
		}
	}
	var errs []error
	for _, m := range mounts {
		for _, dir := range subtree(filepath.Join(m, rel)) {
			if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", dir, err))
			}
		}
		// The shared parents (/everynode/P, /everynode) go once no node uses them.
		for parent := filepath.Dir(filepath.Join(m, rel)); parent != m && strings.HasPrefix(parent, m); parent = filepath.Dir(parent) {
			if os.Remove(parent) != nil {
				break
			}
		}
	}
	return errors.Join(errs...)
}

// subtree lists root and every cgroup below it, deepest first.
func subtree(root string) []string {
	var dirs []string
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	return dirs
}

// procs are the processes in the cgroup at dir (not below it).
func procs(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
