// Package bench is `everynode bench`: it runs DaemonSet scenarios on fresh sandboxes,
// once with kube-controller-manager's DaemonSet controller and once with everynode's,
// each in a process of its own behind a counting proxy, and prints one table of what
// each cost.
package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/everynode/everynode/internal/component"
)

// Options configure a benchmark run: the typed form of `everynode bench`'s flags.
type Options struct {
	// Binary is the everynode binary, run as the sandbox and the controllers.
	Binary      string
	Scenarios   []string
	Controllers []string
	// QPS and Burst are both controllers' client rate limit; QPS <= 0 lifts it.
	QPS   float32
	Burst int

	Nodes int

	ChurnNodes      int
	ChurnDaemonSets int
	// ChurnPools is how many pools the churn DaemonSets' node selectors choose from.
	ChurnPools int
	// ChurnChanges is what the churn changes: ChurnMoves or ChurnMixed.
	ChurnChanges     string
	ChurnRate        int
	ChurnDuration    time.Duration
	ChurnAddNodes    int
	SteadyNodes      int
	SteadyDaemonSets int
	SteadyPercent    int
	BigNodes         int
	BigPods          int
	BigDaemonSets    int
	BurstNodes       int
	BurstAdd         int

	FloorPods     int
	FloorParallel int

	PodReadyDelay time.Duration
	PodStopDelay  time.Duration
	Timeout       time.Duration
	WorkDir       string
	Keep          bool
	ByResource    bool
	// ProfileDir, if set, receives CPU profiles of everynode's controller and of
	// the floor's over each scenario run and a heap profile at its end (see
	// startProfiler).
	ProfileDir string
	// EveryNodeArgs are added to the command line of everynode's controller (for
	// trying its flags; the default is none).
	EveryNodeArgs []string
	// Command is the command line, printed above the table.
	Command string
	// JSONPath, if set, receives the results as JSON too (JSONReport).
	JSONPath string
	// Rounds is how many times each scenario runs per controller (see rounds.go).
	Rounds int
}

// DefaultOptions fit a 2-core machine.
func DefaultOptions() Options {
	return Options{
		Scenarios:        DefaultScenarios(),
		Controllers:      []string{Upstream, EveryNode, Floor},
		QPS:              20,
		Burst:            30,
		Nodes:            1000,
		ChurnNodes:       1000,
		ChurnDaemonSets:  10,
		ChurnPools:       5,
		ChurnChanges:     ChurnMoves,
		ChurnRate:        50,
		ChurnDuration:    60 * time.Second,
		ChurnAddNodes:    200,
		SteadyNodes:      250,
		SteadyDaemonSets: 20,
		SteadyPercent:    10,
		BigNodes:         1000,
		BigPods:          10000,
		BigDaemonSets:    10,
		BurstNodes:       5000,
		BurstAdd:         500,
		FloorPods:        1000,
		FloorParallel:    16,
		PodReadyDelay:    time.Second,
		PodStopDelay:     time.Second,
		Timeout:          30 * time.Minute,
		Rounds:           1,
	}
}

// Validate reports the first invalid option.
func (o *Options) Validate() error {
	known := map[string]bool{}
	for _, s := range ScenarioNames() {
		known[s] = true
	}
	for _, s := range o.Scenarios {
		if !known[s] {
			return fmt.Errorf("unknown scenario %q; choose from %s", s, strings.Join(ScenarioNames(), ", "))
		}
	}
	if len(o.Scenarios) == 0 {
		return fmt.Errorf("--scenarios names none")
	}
	for _, c := range o.Controllers {
		if c != Upstream && c != EveryNode && c != Floor {
			return fmt.Errorf("unknown controller %q; use %s, %s and/or %s", c, Upstream, EveryNode, Floor)
		}
	}
	switch {
	case len(o.Controllers) == 0:
		return fmt.Errorf("--controllers names none")
	case o.Burst < 0:
		return fmt.Errorf("--kube-api-burst must not be negative")
	case o.QPS > 0 && o.Burst < 1:
		return fmt.Errorf("--kube-api-burst must be at least 1 with a --kube-api-qps")
	case o.Nodes < 1 || o.ChurnNodes < 1 || o.SteadyNodes < 1 || o.BigNodes < 1 || o.BurstNodes < 1 || o.BurstAdd < 1:
		return fmt.Errorf("node counts must be at least 1")
	case o.BigPods < 0:
		return fmt.Errorf("--big-pods must not be negative")
	case o.ChurnDaemonSets < 1 || o.SteadyDaemonSets < 1 || o.BigDaemonSets < 1:
		return fmt.Errorf("DaemonSet counts must be at least 1")
	case o.ChurnPools < 2:
		return fmt.Errorf("--churn-pools must be at least 2")
	case o.ChurnChanges != ChurnMoves && o.ChurnChanges != ChurnMixed:
		return fmt.Errorf("--churn-changes must be %s or %s", ChurnMoves, ChurnMixed)
	case o.ChurnRate < 1 || o.ChurnDuration < time.Second || o.ChurnAddNodes < 0:
		return fmt.Errorf("--churn-rate must be at least 1, --churn-duration at least 1s, --churn-add-nodes not negative")
	case o.SteadyPercent < 1 || o.SteadyPercent > 100:
		return fmt.Errorf("--steady-flip-percent must be between 1 and 100")
	case o.FloorPods < 1 || o.FloorParallel < 1:
		return fmt.Errorf("--floor-pods and --floor-parallelism must be at least 1")
	case o.Timeout <= 0:
		return fmt.Errorf("--timeout must be positive")
	case o.Rounds < 1:
		return fmt.Errorf("--rounds must be at least 1")
	}
	return nil
}

// Run runs every selected scenario with every selected controller, o.Rounds times,
// and writes the table to out; progress goes to progress as it happens.
func Run(ctx context.Context, o Options, out, progress io.Writer) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if o.Binary == "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		o.Binary = self
	}
	work, err := os.MkdirTemp(o.WorkDir, "everynode-bench-")
	if err != nil {
		return err
	}
	if !o.Keep {
		defer os.RemoveAll(work)
	}
	started := time.Now()
	// The floor's column only when a scenario it runs is selected.
	columns := o.Controllers
	if !slices.ContainsFunc(o.Scenarios, func(name string) bool { return scenarioByName(name, o).floor }) {
		columns = slices.DeleteFunc(slices.Clone(columns), func(c string) bool { return c == Floor })
	}
	table := Table{Controllers: columns}
	detail := Table{Controllers: columns}
	report := JSONReport{Started: started.UTC(), Machine: Machine(), Command: o.Command, QPS: max(o.QPS, 0), Burst: o.Burst, Controllers: columns}
	var durations []string
	failed := 0
	total, done := plannedRuns(o), 0
	for _, name := range o.Scenarios {
		sc := scenarioByName(name, o)
		js := JSONScenario{Name: name, Title: sc.title}
		runs := map[string][]RunMetrics{}
		counted := map[string][]RunMetrics{}
		for round := 1; round <= o.Rounds && ctx.Err() == nil; round++ {
			for _, ctrl := range roundOrder(o.Controllers, round) {
				if ctrl == Floor && !sc.floor {
					if round == 1 {
						js.Runs = append(js.Runs, JSONRun{Controller: ctrl, Skipped: true})
					}
					continue
				}
				done++
				tag, label, title := runNames(name, ctrl, round, o.Rounds)
				logf := func(format string, args ...any) {
					fmt.Fprintf(progress, "%s [%d/%d %s %s] %s\n", time.Now().Format("15:04:05"), done, total, name, label, fmt.Sprintf(format, args...))
				}
				dir := filepath.Join(work, tag)
				t0 := time.Now()
				run, counts := runOne(ctx, o, sc, ctrl, dir, tag, logf)
				took := time.Since(t0).Round(time.Second)
				jr := jsonRun(run, took)
				if o.Rounds > 1 {
					jr.Round = round
				}
				js.Runs = append(js.Runs, jr)
				durations = append(durations, fmt.Sprintf("%s %v", title, took))
				if run.Err != nil {
					failed++
					logf("FAILED after %v: %v (files in %s)", took, run.Err, dir)
				} else {
					logf("done in %v", took)
				}
				runs[ctrl] = append(runs[ctrl], run)
				counted[ctrl] = append(counted[ctrl], RunMetrics{Controller: ctrl, Metrics: countsByResource(counts), Err: run.Err})
				if ctx.Err() != nil {
					break
				}
			}
		}
		res := Result{Scenario: sc.title}
		det := Result{Scenario: sc.title}
		for _, ctrl := range o.Controllers {
			switch {
			case ctrl == Floor && !sc.floor:
				res.Runs = append(res.Runs, RunMetrics{Controller: ctrl, Skipped: true})
				det.Runs = append(det.Runs, RunMetrics{Controller: ctrl, Skipped: true})
			case len(runs[ctrl]) > 0:
				res.Runs = append(res.Runs, medianRun(runs[ctrl]))
				det.Runs = append(det.Runs, medianRun(counted[ctrl]))
			}
		}
		table.Results = append(table.Results, res)
		detail.Results = append(detail.Results, det)
		report.Scenarios = append(report.Scenarios, js)
		if ctx.Err() != nil {
			break
		}
	}
	fmt.Fprintf(out, "everynode bench, %s; %s\n\n", started.UTC().Format("2006-01-02 15:04 MST"), Machine())
	if o.Command != "" {
		fmt.Fprintf(out, "    %s\n\n", o.Command)
	}
	fmt.Fprintf(out, "Every controller: client rate limit %s, each in its own process behind a counting proxy; upstream and everynode sync 2 DaemonSets at a time.", limitText(o.QPS, o.Burst))
	if slices.Contains(columns, Floor) {
		fmt.Fprintf(out, " floor (churn only): creates and deletes of per-node decisions, 16 nodes at a time, no status; its convergence is read from the pods.")
	}
	if len(o.EveryNodeArgs) > 0 {
		fmt.Fprintf(out, " everynode runs with %s.", strings.Join(o.EveryNodeArgs, " "))
	}
	if o.Rounds > 1 {
		fmt.Fprintf(out, " Each scenario ran %d rounds per controller, the controllers in turn (in reverse order every other round): each cell is the median of its rounds, each ratio one of medians; the JSON has every round.", o.Rounds)
	}
	fmt.Fprint(out, "\n\n")
	fmt.Fprint(out, table.Markdown())
	if o.ByResource {
		fmt.Fprintf(out, "\nAPI requests of the measured phase by verb and resource:\n\n")
		fmt.Fprint(out, detail.Markdown())
	}
	fmt.Fprintf(out, "\nRuns (sandbox start to stop): %s; all: %v.\n", strings.Join(durations, ", "), time.Since(started).Round(time.Second))
	if o.Keep {
		fmt.Fprintf(out, "Sandbox data and logs kept in %s\n", work)
	}
	if o.JSONPath != "" {
		if err := writeJSONReport(o.JSONPath, &report); err != nil {
			return err
		}
		fmt.Fprintf(progress, "results written as JSON to %s\n", o.JSONPath)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if failed > 0 {
		return fmt.Errorf("%d run(s) failed", failed)
	}
	return nil
}

// plannedRuns is how many (scenario, controller) runs o asks for: the floor runs
// only the scenarios it can.
func plannedRuns(o Options) int {
	n := 0
	for _, name := range o.Scenarios {
		for _, ctrl := range o.Controllers {
			if ctrl != Floor || scenarioByName(name, o).floor {
				n++
			}
		}
	}
	return n * o.Rounds
}

// writeJSONReport writes r to path.
func writeJSONReport(path string, r *JSONReport) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing the JSON results: %w", err)
	}
	if err := r.Write(f); err != nil {
		f.Close()
		return fmt.Errorf("writing the JSON results to %s: %w", path, err)
	}
	return f.Close()
}

func limitText(qps float32, burst int) string {
	if qps <= 0 {
		return "none (unlimited QPS)"
	}
	return fmt.Sprintf("QPS %g, burst %d", qps, burst)
}

// Machine describes the machine: CPUs and memory.
func Machine() string {
	mem := "memory unknown"
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		if b := statusBytes(string(data), "MemTotal:"); b > 0 {
			mem = fmt.Sprintf("%.1f GiB memory", float64(b)/(1<<30))
		}
	}
	return fmt.Sprintf("%d CPUs (nproc), %s, %s/%s", runtime.NumCPU(), mem, runtime.GOOS, runtime.GOARCH)
}

// countsByResource turns request counts into metrics: per verb and resource, the
// requests, the errors and the bytes of the responses.
func countsByResource(c Counts) []Metric {
	var out []Metric
	for _, k := range c.Keys() {
		t := c[k]
		if t == (Tally{}) {
			continue
		}
		name := k.Verb + " " + k.Resource
		out = append(out,
			Metric{Name: name, Unit: Count, Value: float64(t.Requests), OmitIfZero: true},
			Metric{Name: name + ": errors", Unit: Count, Value: float64(t.Errors), OmitIfZero: true},
			Metric{Name: name + ": responses (MiB)", Unit: Bytes, Value: float64(t.Bytes)})
	}
	return out
}

// runCtx is one scenario run with one controller: its sandbox, proxy and controller,
// and the metrics gathered so far.
type runCtx struct {
	ctx     context.Context
	o       Options
	sb      *Sandbox
	proxy   *Proxy
	ctrl    *ControllerProcess
	w       *watcher
	rate    float64 // pods a second the API server created for a plain client
	metrics []Metric
	// measured are the requests of the scenario's measured phase.
	measured Counts
	logf     func(string, ...any)
}

func (r *runCtx) add(m Metric) { r.metrics = append(r.metrics, m) }

// runOne runs one scenario with one controller on a fresh sandbox in dir.
func runOne(ctx context.Context, o Options, sc scenario, ctrl, dir, tag string, logf func(string, ...any)) (RunMetrics, Counts) {
	r := &runCtx{ctx: ctx, o: o, logf: logf}
	err := r.run(sc, ctrl, dir, tag)
	return RunMetrics{Controller: ctrl, Metrics: r.metrics, Err: err}, r.measured
}

// tag names the run's profiles: <scenario>-<controller>, and -round<N> with rounds.
func (r *runCtx) run(sc scenario, ctrl, dir, tag string) (err error) {
	ctx := r.ctx
	t0 := time.Now()
	r.sb, err = StartSandbox(ctx, SandboxOptions{Binary: r.o.Binary, Dir: dir, Nodes: sc.nodes,
		PodReadyDelay: r.o.PodReadyDelay, PodStopDelay: r.o.PodStopDelay})
	if err != nil {
		return err
	}
	defer r.sb.Stop()
	r.logf("sandbox with %d nodes ready in %v", sc.nodes, time.Since(t0).Round(100*time.Millisecond))

	// The best of two passes: the limit, less the noise of a machine still settling.
	for pass := range 2 {
		rate, err := measureCreateRate(ctx, r.sb.Client, r.o.FloorPods, r.o.FloorParallel)
		if err != nil {
			return fmt.Errorf("measuring the API server's pod create rate: %w", err)
		}
		r.logf("API server creates %.0f pods/s for a plain client (pass %d of 2: %d pods, %d in parallel)", rate, pass+1, r.o.FloorPods, r.o.FloorParallel)
		r.rate = max(r.rate, rate)
	}
	r.add(Metric{Name: "API server pod creates/s, plain client (best of 2)", Unit: PerSecond, Value: r.rate, NoRatio: true})

	if err := ensureNamespace(ctx, r.sb.Client, Namespace); err != nil {
		return err
	}
	if r.w, err = startWatcher(ctx, r.sb.Client); err != nil {
		return err
	}
	defer r.w.stop()
	if sc.prepare != nil {
		if err := sc.prepare(r); err != nil {
			return fmt.Errorf("preparing: %w", err)
		}
	}

	if r.proxy, err = r.sb.StartProxy(filepath.Join(dir, "proxy.kubeconfig")); err != nil {
		return fmt.Errorf("starting the proxy: %w", err)
	}
	defer r.proxy.Close()
	pprofAddr := ""
	if r.o.ProfileDir != "" && ctrl != Upstream {
		if err := os.MkdirAll(r.o.ProfileDir, 0o755); err != nil {
			return fmt.Errorf("creating --profile-dir: %w", err)
		}
		port, err := component.FreePort()
		if err != nil {
			return err
		}
		pprofAddr = fmt.Sprintf("127.0.0.1:%d", port)
	}
	r.ctrl, err = StartController(ctx, ctrl, r.o.Binary, filepath.Join(dir, "proxy.kubeconfig"), r.o.QPS, r.o.Burst, filepath.Join(dir, "controller-"+ctrl+".log"), pprofAddr, r.o.EveryNodeArgs)
	if err != nil {
		return err
	}
	defer r.ctrl.Stop()
	if err := waitControllerReady(ctx, r.ctrl, r.proxy, 3*time.Second); err != nil {
		return err
	}
	r.logf("controller watching (pid %d)", r.ctrl.Pid())
	if sc.separateGate && ctrl != EveryNode {
		stop, err := r.startSeparateGate(dir)
		if err != nil {
			return fmt.Errorf("starting the separate node gate: %w", err)
		}
		defer stop()
	}

	var prof *profiler
	if pprofAddr != "" {
		prof = startProfiler(ctx, pprofAddr, r.o.ProfileDir, tag)
	}
	sampler := StartSampler(r.ctrl.Pid(), sampleEvery)
	runErr := sc.run(r)
	anon := sampler.Stop()
	if prof != nil {
		n, err := prof.stop()
		r.logf("%d CPU profiles of %v each and a heap profile in %s (%s-*.pprof); error: %v", n, profileChunk, r.o.ProfileDir, tag, err)
	}
	if s, err := ReadProc(r.ctrl.Pid()); err == nil {
		r.add(Metric{Name: "controller peak RSS, VmHWM (MiB)", Unit: Bytes, Value: float64(s.PeakRSS)})
		r.add(Metric{Name: "controller peak RssAnon, sampled (MiB)", Unit: Bytes, Value: float64(anon)})
	}
	return runErr
}

// sampleEvery is how often the controller's anonymous memory is sampled.
const sampleEvery = 250 * time.Millisecond

// phase measures one stretch of a scenario: wall time, the controller's and the API
// server's CPU, and the controller's requests.
type phase struct {
	start   time.Time
	cpu     time.Duration
	apiCPU  time.Duration
	counts  Counts
	apiPid  int
	ctrlPid int
}

type phaseResult struct {
	elapsed time.Duration
	cpu     time.Duration
	apiCPU  time.Duration
	counts  Counts
}

func (r *runCtx) begin() phase {
	p := phase{start: time.Now(), counts: r.proxy.Snapshot(), apiPid: r.sb.APIServerPid(), ctrlPid: r.ctrl.Pid()}
	if s, err := ReadProc(p.ctrlPid); err == nil {
		p.cpu = s.CPU
	}
	if s, err := ReadProc(p.apiPid); err == nil && p.apiPid != 0 {
		p.apiCPU = s.CPU
	}
	return p
}

// end measures the phase up to now.
func (r *runCtx) end(p phase) phaseResult {
	return r.endAt(p, time.Now())
}

// endAt measures the phase, its wall time up to at and its costs up to now.
func (r *runCtx) endAt(p phase, at time.Time) phaseResult {
	res := phaseResult{elapsed: at.Sub(p.start), counts: r.proxy.Snapshot().Sub(p.counts)}
	if s, err := ReadProc(p.ctrlPid); err == nil {
		res.cpu = s.CPU - p.cpu
	}
	if s, err := ReadProc(p.apiPid); err == nil && p.apiPid != 0 {
		res.apiCPU = s.CPU - p.apiCPU
	}
	return res
}

// addConverge records a convergence time and sets it against the API server's
// create rate for the pods it took.
func (r *runCtx) addConverge(prefix string, elapsed time.Duration, pods int) {
	r.add(Metric{Name: prefix + "converge (s)", Unit: Seconds, Value: elapsed.Seconds()})
	if pods > 0 && r.rate > 0 {
		floor := float64(pods) / r.rate
		r.add(Metric{Name: fmt.Sprintf("%sAPI floor: %d pods ÷ create rate (s)", prefix, pods), Unit: Seconds, Value: floor, NoRatio: true})
		// No ratio: the floors of the two runs come from two sandboxes, and the
		// ratio of the convergence times is the row above.
		r.add(Metric{Name: prefix + "converge ÷ API floor", Unit: Factor, Value: elapsed.Seconds() / floor, NoRatio: true})
	}
}

// addCosts records what a phase cost: CPU of the controller and the API server, and
// the controller's requests by verb, their errors and response bytes. Its requests
// are the ones --by-resource details.
func (r *runCtx) addCosts(prefix string, pr phaseResult) {
	r.measured = pr.counts
	r.add(Metric{Name: prefix + "controller CPU (s)", Unit: CPUSeconds, Value: pr.cpu.Seconds()})
	r.add(Metric{Name: prefix + "kube-apiserver CPU (s)", Unit: CPUSeconds, Value: pr.apiCPU.Seconds()})
	total := pr.counts.Total()
	r.add(Metric{Name: prefix + "API requests: all", Unit: Count, Value: float64(total.Requests)})
	var writes int64
	for _, v := range []string{"create", "update", "patch", "delete", "deletecollection"} {
		writes += pr.counts.Verb(v).Requests
	}
	r.add(Metric{Name: prefix + "API requests: writes", Unit: Count, Value: float64(writes)})
	for _, v := range Verbs {
		r.add(Metric{Name: prefix + "API requests: " + v, Unit: Count, Value: float64(pr.counts.Verb(v).Requests), OmitIfZero: true})
	}
	r.add(Metric{Name: prefix + "API errors (status ≥ 400)", Unit: Count, Value: float64(total.Errors), OmitIfZero: true})
	r.add(Metric{Name: prefix + "API responses (MiB)", Unit: Bytes, Value: float64(total.Bytes)})
}
