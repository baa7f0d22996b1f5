// Command everynode-agent is the workload of the sandbox's real nodes: a tiny static
// program that the sandbox packs into the images it imports into each real node's
// containerd (everynode.local/pause:1, everynode.local/agent:1 and :2), so that a
// real node runs containers without a registry. What it does is set by flags, or by
// the environment variables named after them (AGENT_EXIT_AFTER, ...), so that a pod
// spec can choose it:
//
//	everynode-agent                      run until stopped
//	everynode-agent pause                the pod sandbox's process: wait for a signal
//	everynode-agent probe FILE           exit 0 if FILE exists, 1 if not: an exec
//	                                     probe (the images hold no shell)
//	everynode-agent probe-api            exit 0 if the API server answers the pod's
//	                                     service account at KUBERNETES_SERVICE_HOST
//	--exit-after 5s --exit-code 3        exit after a time, with a code
//	--ready-file /tmp/ready --ready-after 2s
//	                                     create a file (for an exec readiness probe)
//	--alloc-mb 10 --alloc-every 100ms    allocate memory until killed (OOMKilled)
//
// It prints its version (AGENT_VERSION, set by the image) when it starts, and exits
// 0 on SIGTERM after --stop-delay.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

type options struct {
	exitAfter  time.Duration
	exitCode   int
	readyFile  string
	readyAfter time.Duration
	allocMB    int
	allocEvery time.Duration
	stopDelay  time.Duration
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "pause" {
		pause()
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "probe" {
		os.Exit(probe(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "probe-api" {
		os.Exit(probeAPI(serviceAccountDir))
	}
	o, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "everynode-agent:", err)
		os.Exit(2)
	}
	os.Exit(run(o))
}

// parse reads the flags, each defaulting to its environment variable.
func parse(args []string) (options, error) {
	o := options{allocEvery: 100 * time.Millisecond}
	fs := flag.NewFlagSet("everynode-agent", flag.ContinueOnError)
	fs.DurationVar(&o.exitAfter, "exit-after", 0, "exit after this long (0: never)")
	fs.IntVar(&o.exitCode, "exit-code", 0, "the code to exit with after --exit-after")
	fs.StringVar(&o.readyFile, "ready-file", "", "a file to create once ready, for an exec readiness probe")
	fs.DurationVar(&o.readyAfter, "ready-after", 0, "how long after the start to create --ready-file")
	fs.IntVar(&o.allocMB, "alloc-mb", 0, "MiB of memory to allocate and touch every --alloc-every, until killed")
	fs.DurationVar(&o.allocEvery, "alloc-every", o.allocEvery, "how often to allocate --alloc-mb")
	fs.DurationVar(&o.stopDelay, "stop-delay", 0, "how long to take to exit after SIGTERM")
	// The environment sets a flag's default: AGENT_ and the flag's name in capitals.
	var bad error
	fs.VisitAll(func(f *flag.Flag) {
		name := "AGENT_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok && bad == nil {
			if err := f.Value.Set(v); err != nil {
				bad = fmt.Errorf("%s=%q: %w", name, v, err)
			}
		}
	})
	if bad != nil {
		return o, bad
	}
	return o, fs.Parse(args)
}

func run(o options) int {
	fmt.Printf("everynode-agent version %s starting\n", version())
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	var exit <-chan time.Time
	if o.exitAfter > 0 {
		exit = time.After(o.exitAfter)
	}
	var ready <-chan time.Time
	if o.readyFile != "" {
		ready = time.After(o.readyAfter)
	}
	var alloc <-chan time.Time
	if o.allocMB > 0 {
		t := time.NewTicker(o.allocEvery)
		defer t.Stop()
		alloc = t.C
	}
	var held [][]byte
	for {
		select {
		case <-ready:
			ready = nil
			if err := os.WriteFile(o.readyFile, []byte("ready\n"), 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "everynode-agent: writing the ready file:", err)
				return 1
			}
			fmt.Println("ready")
		case <-alloc:
			b := make([]byte, o.allocMB<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1 // touch every page, so it counts against the memory limit
			}
			held = append(held, b)
			fmt.Printf("holding %d MiB\n", len(held)*o.allocMB)
		case <-exit:
			fmt.Printf("exiting with code %d\n", o.exitCode)
			return o.exitCode
		case s := <-stop:
			fmt.Printf("got %s, stopping in %s\n", s, o.stopDelay)
			time.Sleep(o.stopDelay)
			return 0
		}
	}
}

// pause is a pod sandbox's process: it holds the pod's namespaces until stopped, and
// reaps children that end up in its pid namespace.
func pause() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}

// probe is an exec probe's check: whether the one file named exists.
func probe(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: everynode-agent probe FILE")
		return 2
	}
	if _, err := os.Stat(args[0]); err != nil {
		fmt.Println(err)
		return 1
	}
	return 0
}

func version() string {
	if v := os.Getenv("AGENT_VERSION"); v != "" {
		return v
	}
	return "unknown"
}
