package nodesim

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/clock"
)

// Config tunes a Simulator. Start from DefaultConfig; a zero Clock, Workers or
// LeaseInterval means its default, while zero Nodes and zero delays mean what they say.
type Config struct {
	// Nodes is how many nodes (sim-node-0 …) to register at start if missing.
	Nodes int
	// PodReadyDelay is how long a pod stays Pending before it runs and is Ready.
	PodReadyDelay time.Duration
	// PodStopDelay caps how long a pod being deleted lingers before it is removed.
	PodStopDelay time.Duration
	// CrashLoopBackOff is how long a crash-looping container waits before its
	// second restart, doubling after each later crash up to 5 minutes, as the
	// kubelet's back-off; 0 restarts it after a short recovery every time.
	CrashLoopBackOff time.Duration
	// LeaseInterval is how often each node's Lease is renewed: 1s to 20s (half
	// the lease duration).
	LeaseInterval time.Duration
	// Clock is the simulator's time source (tests use a fake one).
	Clock clock.WithTicker
	// Workers is the least number of workers for each of the pod, node and lease
	// queues; a large simulation gets more (workersFor).
	Workers int
	// NodeReadyRequires, a label selector, keeps each simulated node NotReady until
	// a pod matching it is Running there, as a CNI agent gates a real node's
	// readiness; "" for none. A node's AnnotationReadyRequires replaces it.
	NodeReadyRequires string
}

// Defaults of Config.
const (
	DefaultNodes         = 3
	DefaultPodReadyDelay = time.Second
	DefaultPodStopDelay  = time.Second
	// DefaultCrashLoopBackOff is the kubelet's initial back-off.
	DefaultCrashLoopBackOff = 10 * time.Second
	DefaultLeaseInterval    = 10 * time.Second
	DefaultWorkers          = 4
)

// nodesPerWorker is how many nodes one worker of each queue serves: each node's
// lease is one write per lease interval, and a worker waits for the API server's
// answer to each write. At 5,000 nodes the queues get 50 workers each, so that 500
// renewals a second keep up while a loaded API server takes 100 ms to answer one;
// with fewer, renewals fall behind, the node lifecycle controller finds leases
// expired and taints healthy nodes unreachable.
const nodesPerWorker = 100

// workersFor is the number of workers of each queue for c: c.Workers, or one for
// each nodesPerWorker nodes when that is more.
func workersFor(c Config) int {
	return max(c.Workers, c.Nodes/nodesPerWorker)
}

// maxLeaseInterval keeps a lease valid across a renewal that comes half an
// interval late, as the spreading of renewals may make it (see nextRenewal).
const maxLeaseInterval = leaseDuration / 2

// minLeaseInterval keeps lease renewals from flooding the API server.
const minLeaseInterval = time.Second

// MaxNodes bounds the simulated nodes, registered and adopted together: each takes
// a /24 pod range out of 10.128.0.0/9.
const MaxNodes = 1 << 15

// DefaultConfig returns a Config with every default filled in.
func DefaultConfig() Config {
	return Config{
		Nodes:            DefaultNodes,
		PodReadyDelay:    DefaultPodReadyDelay,
		PodStopDelay:     DefaultPodStopDelay,
		CrashLoopBackOff: DefaultCrashLoopBackOff,
		LeaseInterval:    DefaultLeaseInterval,
		Clock:            clock.RealClock{},
		Workers:          DefaultWorkers,
	}
}

// AddFlags binds the user-facing fields of c to flags; their defaults are c's
// current values.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&c.Nodes, "nodes", c.Nodes, "number of simulated nodes (sim-node-0 …) to register at start")
	fs.DurationVar(&c.PodReadyDelay, "pod-ready-delay", c.PodReadyDelay,
		"how long a pod on a simulated node stays Pending before it is Running and Ready (per pod: annotation "+AnnotationReadyAfter+")")
	fs.DurationVar(&c.PodStopDelay, "pod-stop-delay", c.PodStopDelay,
		"longest time a deleted pod on a simulated node lingers before it is removed (never longer than its grace period)")
	fs.DurationVar(&c.CrashLoopBackOff, "crash-loop-backoff", c.CrashLoopBackOff,
		"how long a crash-looping container on a simulated node waits before its second restart, doubling after each later crash up to 5m, as the kubelet's back-off (0: restart after a short recovery every time; per pod: annotation "+AnnotationRestartEvery+" sets how long each run lasts)")
	fs.StringVar(&c.NodeReadyRequires, "node-ready-requires", c.NodeReadyRequires,
		"label selector: keep each simulated node NotReady (network not ready) until a pod matching it runs there, as a CNI agent does (per node: annotation "+AnnotationReadyRequires+")")
}

// Validate reports every problem with c, or nil.
func (c Config) Validate() error {
	var errs []error
	if c.Nodes < 0 || c.Nodes > MaxNodes {
		errs = append(errs, fmt.Errorf("nodes must be between 0 and %d, got %d", MaxNodes, c.Nodes))
	}
	if c.PodReadyDelay < 0 {
		errs = append(errs, fmt.Errorf("pod ready delay must not be negative, got %v", c.PodReadyDelay))
	}
	if c.PodStopDelay < 0 {
		errs = append(errs, fmt.Errorf("pod stop delay must not be negative, got %v", c.PodStopDelay))
	}
	if c.CrashLoopBackOff < 0 {
		errs = append(errs, fmt.Errorf("crash loop back-off must not be negative, got %v", c.CrashLoopBackOff))
	}
	if c.LeaseInterval != 0 && (c.LeaseInterval < minLeaseInterval || c.LeaseInterval > maxLeaseInterval) {
		errs = append(errs, fmt.Errorf("lease interval must be 0 (the default) or between %v and %v, got %v", minLeaseInterval, maxLeaseInterval, c.LeaseInterval))
	}
	if _, err := labels.Parse(c.NodeReadyRequires); err != nil {
		errs = append(errs, fmt.Errorf("node-ready-requires %q is not a label selector such as app=cni: %v", c.NodeReadyRequires, err))
	}
	if c.Workers < 0 {
		errs = append(errs, fmt.Errorf("workers must not be negative, got %d", c.Workers))
	}
	return errors.Join(errs...)
}

// withDefaults fills the fields whose zero value means "default".
func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.LeaseInterval == 0 {
		c.LeaseInterval = DefaultLeaseInterval
	}
	return c
}
