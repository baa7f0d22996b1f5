package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat (USER_HZ, 100 on every
// Linux architecture Go supports).
const userHZ = 100

// ProcSample is what /proc says of a process at one moment.
type ProcSample struct {
	// CPU is the process's user plus system CPU time since it started
	// (/proc/<pid>/stat utime+stime, all threads; children not included).
	CPU time.Duration
	// PeakRSS is the highest resident set size the process has had since it started
	// (VmHWM in /proc/<pid>/status).
	PeakRSS int64
	// RSS is its resident set size now (VmRSS).
	RSS int64
	// AnonRSS is the anonymous part of RSS now (RssAnon): heap, stacks and other
	// private memory, without the pages of the binary and other files.
	AnonRSS int64
}

// ReadProc samples a process.
func ReadProc(pid int) (ProcSample, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcSample{}, err
	}
	cpu, err := parseStatCPU(string(stat))
	if err != nil {
		return ProcSample{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcSample{}, err
	}
	return ProcSample{
		CPU:     cpu,
		PeakRSS: statusBytes(string(status), "VmHWM:"),
		RSS:     statusBytes(string(status), "VmRSS:"),
		AnonRSS: statusBytes(string(status), "RssAnon:"),
	}, nil
}

// Sampler samples a process's anonymous resident memory at an interval and keeps
// the largest value seen.
type Sampler struct {
	stop chan struct{}
	done chan struct{}
	peak int64
}

// StartSampler samples pid every interval until Stop.
func StartSampler(pid int, interval time.Duration) *Sampler {
	s := &Sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if p, err := ReadProc(pid); err == nil {
				s.peak = max(s.peak, p.AnonRSS)
			}
			select {
			case <-t.C:
			case <-s.stop:
				return
			}
		}
	}()
	return s
}

// Stop stops sampling and returns the largest anonymous RSS seen, in bytes.
func (s *Sampler) Stop() int64 {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	return s.peak
}

// parseStatCPU reads utime+stime from the text of /proc/<pid>/stat.
func parseStatCPU(stat string) (time.Duration, error) {
	// The command name (field 2) is in parentheses and may hold spaces; fields
	// after it start with the state (field 3). utime and stime are fields 14 and 15.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name")
	}
	fields := strings.Fields(stat[i+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("only %d fields", len(fields)+2)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("utime %q, stime %q", fields[11], fields[12])
	}
	return time.Duration(utime+stime) * time.Second / userHZ, nil
}

// statusBytes reads a "Key:   123 kB" line of /proc/<pid>/status, in bytes.
func statusBytes(status, key string) int64 {
	for _, line := range strings.Split(status, "\n") {
		if strings.HasPrefix(line, key) {
			f := strings.Fields(line[len(key):])
			if len(f) >= 1 {
				v, _ := strconv.ParseInt(f[0], 10, 64)
				return v << 10
			}
		}
	}
	return 0
}

// findChild returns the pid of a child of parent whose command line holds every
// one of args in order, one argument each, or 0.
func findChild(parent int, args ...string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) < 2 || fields[1] != strconv.Itoa(parent) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if containsInOrder(strings.Split(string(cmdline), "\x00"), args) {
			return pid
		}
	}
	return 0
}

func containsInOrder(have, want []string) bool {
	j := 0
	for _, h := range have {
		if j < len(want) && h == want[j] {
			j++
		}
	}
	return j == len(want)
}
