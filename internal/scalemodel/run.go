package scalemodel

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	apps "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"

	"github.com/everynode/everynode/internal/controller"
)

// Size is one run of the model.
type Size struct {
	Nodes      int
	DaemonSets int
	Pools      int
	// ChurnRate node pool moves a second for ChurnDuration.
	ChurnRate     int
	ChurnDuration time.Duration
	// Timeout bounds each wait for convergence.
	Timeout time.Duration
	// ProfileDir, when set, receives a CPU profile of the churn phase,
	// churn-<nodes>.pprof.
	ProfileDir string
}

// DefaultSize is the model's shape at n nodes: the churn scenario's 10 DaemonSets over
// 5 pools, 200 pool moves a second for 30 s.
func DefaultSize(n int) Size {
	return Size{Nodes: n, DaemonSets: 10, Pools: 5, ChurnRate: 200, ChurnDuration: 30 * time.Second, Timeout: 15 * time.Minute}
}

// Result is what one run measured. CPU is the whole process's (the fake API, its
// watches, the kubelet and the controller); memory is the controller's alone.
type Result struct {
	Nodes      int `json:"nodes"`
	DaemonSets int `json:"daemonSets"`
	Pods       int `json:"pods"`
	// CreateSeconds: from the DaemonSets' creation until every one converged.
	CreateSeconds    float64 `json:"createSeconds"`
	CreateCPUSeconds float64 `json:"createCpuSeconds"`
	// RolloutSeconds: from every template's change until every DaemonSet converged.
	RolloutSeconds    float64 `json:"rolloutSeconds"`
	RolloutCPUSeconds float64 `json:"rolloutCpuSeconds"`
	// ChurnMoves were made at ChurnRate; ChurnCPUPerMoveMs is the CPU from the first
	// move until every DaemonSet converged again, per move.
	ChurnMoves        int     `json:"churnMoves"`
	ChurnSeconds      float64 `json:"churnSettledSeconds"`
	ChurnCPUPerMoveMs float64 `json:"churnCpuPerMoveMs"`
	// ControllerHeapBytes is the live heap the controller holds (its caches, memos
	// and state) after the churn: the heap with it running less the heap once it and
	// its informers are stopped and dropped, the store and the kubelet's cache left.
	ControllerHeapBytes int64   `json:"controllerHeapBytes"`
	HeapPerNodeKiB      float64 `json:"controllerHeapPerNodeKiB"`
	// ProcessPeakRSSBytes is the process's peak resident set over the run.
	ProcessPeakRSSBytes int64 `json:"processPeakRssBytes"`
}

// Run builds the model at size s and runs its three phases: a cold create, a full
// rollout and node churn. progress gets one line per step.
func Run(ctx context.Context, s Size, progress func(format string, args ...any)) (Result, error) {
	c, err := newCluster(s.Nodes, s.Pools)
	if err != nil {
		return Result{}, err
	}
	progress("%d nodes stored", s.Nodes)
	return c.run(ctx, s, progress)
}

// run runs the three phases on c, whose nodes are stored.
func (c *cluster) run(ctx context.Context, s Size, progress func(format string, args ...any)) (Result, error) {
	r := Result{Nodes: s.Nodes, DaemonSets: s.DaemonSets}
	k, err := startKubelet(ctx, c, 4)
	if err != nil {
		return r, err
	}
	defer k.stop()

	ctrlCtx, stopCtrl := context.WithCancel(ctx)
	ctrlDone, err := startController(ctrlCtx, c)
	if err != nil {
		stopCtrl()
		return r, err
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		stopCtrl()
		return <-ctrlDone
	}
	defer stop()

	// Cold create.
	mark := begin()
	for i := range s.DaemonSets {
		if _, err := c.client.AppsV1().DaemonSets(namespace).Create(ctx, daemonSet(i, s.Pools), metav1.CreateOptions{}); err != nil {
			return r, fmt.Errorf("creating DaemonSet %d: %w", i, err)
		}
	}
	if err := c.waitConverged(ctx, k, s, image1, progress); err != nil {
		return r, fmt.Errorf("cold create: %w", err)
	}
	r.CreateSeconds, r.CreateCPUSeconds = mark.since()
	r.Pods = s.Nodes / s.Pools * s.DaemonSets
	progress("cold create of %d DaemonSets converged in %.1fs", s.DaemonSets, r.CreateSeconds)

	// Full rollout: every template's image changes at once.
	mark = begin()
	for i := range s.DaemonSets {
		patch := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"agent","image":"` + image2 + `"}]}}}}`)
		if _, err := c.client.AppsV1().DaemonSets(namespace).Patch(ctx, daemonSet(i, s.Pools).Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return r, fmt.Errorf("changing DaemonSet %d's image: %w", i, err)
		}
	}
	if err := c.waitConverged(ctx, k, s, image2, progress); err != nil {
		return r, fmt.Errorf("rollout: %w", err)
	}
	r.RolloutSeconds, r.RolloutCPUSeconds = mark.since()
	progress("rollout of %d DaemonSets converged in %.1fs", s.DaemonSets, r.RolloutSeconds)

	// Churn: nodes move to the next pool at ChurnRate.
	stopProfile, err := startProfile(s)
	if err != nil {
		return r, err
	}
	mark = begin()
	if r.ChurnMoves, err = c.churn(ctx, s); err != nil {
		return r, fmt.Errorf("churn: %w", err)
	}
	if err := c.waitConverged(ctx, k, s, image2, progress); err != nil {
		return r, fmt.Errorf("churn: %w", err)
	}
	var cpu float64
	r.ChurnSeconds, cpu = mark.since()
	if err := stopProfile(); err != nil {
		return r, err
	}
	r.ChurnCPUPerMoveMs = cpu * 1000 / float64(max(r.ChurnMoves, 1))
	progress("%d pool moves settled in %.1fs, %.2f ms CPU a move", r.ChurnMoves, r.ChurnSeconds, r.ChurnCPUPerMoveMs)

	// The controller's memory: the live heap with it, then without it.
	with := liveHeap()
	if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
		return r, fmt.Errorf("controller: %w", err)
	}
	without := liveHeap()
	r.ControllerHeapBytes = with - without
	r.HeapPerNodeKiB = float64(r.ControllerHeapBytes) / 1024 / float64(s.Nodes)
	r.ProcessPeakRSSBytes = peakRSS()
	return r, nil
}

// startController runs everynode's controller on c as `everynode controller` runs it:
// full mode, its default settings, no client rate limit (the fake client has none).
func startController(ctx context.Context, c *cluster) (<-chan error, error) {
	cfg := controller.DefaultConfig()
	factory := informers.NewSharedInformerFactoryWithOptions(c.client, 0, cfg.InformerOptions()...)
	opts := cfg.Options(nil, nil)
	opts.ProbeTimeout = 0 // no other controller to ask
	ctrl, err := controller.New(ctx, c.client, factory, opts)
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() {
		factory.Start(ctx.Done())
		err := ctrl.Run(ctx, cfg.Workers)
		factory.Shutdown()
		done <- err
	}()
	return done, nil
}

// waitConverged waits until every DaemonSet's status shows it converged (observed,
// and desired == current == updated == ready == available, none misscheduled) and
// the pods are where they should be, running image.
func (c *cluster) waitConverged(ctx context.Context, k *kubelet, s Size, image string, progress func(string, ...any)) error {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	report := time.Now().Add(15 * time.Second)
	for {
		done, line := c.converged(s)
		if done {
			// The status may not show a node change yet: the pods must, too.
			if done, line = k.placed(s, image); done {
				return nil
			}
		}
		if time.Now().After(report) {
			progress("converging: %s", line)
			report = time.Now().Add(15 * time.Second)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not converged: %s", line)
		case <-tick.C:
		}
	}
}

func (c *cluster) converged(s Size) (bool, string) {
	ok, updated, available, desired := 0, int32(0), int32(0), int32(0)
	first := "" // the first DaemonSet not converged, as its status says
	for i := range s.DaemonSets {
		obj, err := c.api.Tracker.Get(dsResource, namespace, daemonSet(i, s.Pools).Name)
		if err != nil {
			continue
		}
		ds := obj.(*apps.DaemonSet)
		st := ds.Status
		updated, available, desired = updated+st.UpdatedNumberScheduled, available+st.NumberAvailable, desired+st.DesiredNumberScheduled
		if st.ObservedGeneration == ds.Generation && st.NumberMisscheduled == 0 &&
			st.CurrentNumberScheduled == st.DesiredNumberScheduled && st.UpdatedNumberScheduled == st.DesiredNumberScheduled &&
			st.NumberReady == st.DesiredNumberScheduled && st.NumberAvailable == st.DesiredNumberScheduled {
			ok++
		} else if first == "" {
			first = fmt.Sprintf("; %s: generation %d observed %d, desired %d current %d updated %d ready %d available %d misscheduled %d",
				ds.Name, ds.Generation, st.ObservedGeneration, st.DesiredNumberScheduled, st.CurrentNumberScheduled,
				st.UpdatedNumberScheduled, st.NumberReady, st.NumberAvailable, st.NumberMisscheduled)
		}
	}
	return ok == s.DaemonSets, fmt.Sprintf("%d of %d DaemonSets converged; pods updated %d, available %d, of %d%s",
		ok, s.DaemonSets, updated, available, desired, first)
}

// churn moves nodes to the next pool, one after another from the first, at
// s.ChurnRate a second for s.ChurnDuration, and returns how many moves it made.
func (c *cluster) churn(ctx context.Context, s Size) (int, error) {
	total := s.ChurnRate * int(s.ChurnDuration/time.Second)
	start := time.Now()
	for m := range total {
		if wait := time.Until(start.Add(time.Duration(m) * time.Second / time.Duration(s.ChurnRate))); wait > 0 {
			time.Sleep(wait)
		}
		i := m % s.Nodes // node i is in pool i mod Pools: the pools stay the same size
		nodes := c.client.CoreV1().Nodes()
		node, err := nodes.Get(ctx, nodeName(i), metav1.GetOptions{})
		if err != nil {
			return m, err
		}
		pool := 0
		fmt.Sscanf(node.Labels[poolLabel], "pool-%d", &pool)
		node.Labels[poolLabel] = poolName((pool + 1) % s.Pools)
		if _, err := nodes.Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			return m, err
		}
	}
	return total, nil
}

var dsResource = apps.SchemeGroupVersion.WithResource("daemonsets")

// mark is a moment: the wall clock and the process's CPU time.
type mark struct {
	wall time.Time
	cpu  time.Duration
}

func begin() mark { return mark{wall: time.Now(), cpu: processCPU()} }

// since is the wall and CPU seconds from m until now.
func (m mark) since() (wall, cpu float64) {
	return time.Since(m.wall).Seconds(), (processCPU() - m.cpu).Seconds()
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSS is the process's largest resident set so far (ru_maxrss, KiB on Linux).
func peakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024
}

// liveHeap is the heap in use after two collections have freed what is unreachable.
func liveHeap() int64 {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
