package controller

import (
	"fmt"
	"k8s.io/client-go/util/flowcontrol"
	"time"

	"github.com/spf13/pflag"
)

// Config is the configuration of `everynode controller`: the typed form of its flags.
type Config struct {
	// Mode: see Options.Mode.
	Mode        string
	Kubeconfig  string
	Namespace   string
	Workers     int
	QPS         float32
	Burst       int
	ContentType string
	Compression bool
	// RequestTimeout bounds each request but watches; 0: no bound.
	RequestTimeout time.Duration
	BurstReplicas  int
	// PodWriters: see Options.PodWriters.
	PodWriters int
	// MinStatusInterval: see Options.MinStatusInterval.
	MinStatusInterval time.Duration
	// MaxStatusHold: see Options.MaxStatusHold.
	MaxStatusHold time.Duration
	// SyncBatchPeriod: see Options.SyncBatchPeriod.
	SyncBatchPeriod time.Duration
	// NodeGate: see Options.NodeGate.
	NodeGate    bool
	MetricsAddr string
	// ProbeTimeout and ProbeNamespace: see Options.
	ProbeTimeout   time.Duration
	ProbeNamespace string
	Profiling      bool
	// MetricsAuth guards /metrics and /debug/pprof/ with DelegatedAuth.
	MetricsAuth bool
	Resync      time.Duration
	LeaderElect bool
	Leader      LeaderConfig
}

// DefaultMaxStatusHold is the default --max-status-hold.
const DefaultMaxStatusHold = 30 * time.Second

// DefaultProbeTimeout is the default --conflict-probe-timeout: an active DaemonSet
// controller answers in well under a second.
const DefaultProbeTimeout = 3 * time.Second

func DefaultConfig() Config {
	return Config{
		Mode:              ModeFull,
		Workers:           2,
		QPS:               20,
		Burst:             30,
		ContentType:       ContentTypeProtobuf,
		RequestTimeout:    DefaultRequestTimeout,
		BurstReplicas:     DefaultBurstReplicas,
		PodWriters:        DefaultPodWriters,
		MinStatusInterval: time.Second,
		MaxStatusHold:     DefaultMaxStatusHold,
		SyncBatchPeriod:   DefaultSyncBatchPeriod,
		NodeGate:          true,
		MetricsAddr:       ":8080",
		ProbeTimeout:      DefaultProbeTimeout,
		Leader:            DefaultLeaderConfig(),
	}
}

// AddFlags binds the configuration to flags.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Mode, "mode", c.Mode, `"full": place every DaemonSet's pods and roll its updates out (the cluster's own DaemonSet controller must be off). "companion": run beside the cluster's own DaemonSet controller, as on managed clusters, and roll out the updates of OnDelete DaemonSets annotated `+"rollout.everynode.dev/max-unavailable"+` by deleting their old pods in turn; that controller recreates them.`)
	fs.StringVar(&c.Kubeconfig, "kubeconfig", c.Kubeconfig, "Path to a kubeconfig. Default: $KUBECONFIG, then the in-cluster config, then ~/.kube/config.")
	fs.StringVar(&c.Namespace, "namespace", c.Namespace, "Manage the DaemonSets of this namespace only. Default: all namespaces.")
	fs.IntVar(&c.Workers, "workers", c.Workers, "DaemonSets synced concurrently.")
	fs.Float32Var(&c.QPS, "kube-api-qps", c.QPS, "Steady requests per second to the API server; 0 or negative means no client-side limit.")
	fs.IntVar(&c.Burst, "kube-api-burst", c.Burst, "Requests the client may send in a burst above --kube-api-qps.")
	fs.StringVar(&c.ContentType, "kube-api-content-type", c.ContentType, "Wire format of requests and watches: "+ContentTypeProtobuf+" (compact and fast to decode) or "+ContentTypeJSON+".")
	fs.BoolVar(&c.Compression, "kube-api-compression", c.Compression, "Ask the API server to gzip its responses and watch streams: less traffic, more CPU on both ends (off by default: a controller usually sits next to its API server).")
	fs.DurationVar(&c.RequestTimeout, "kube-api-timeout", c.RequestTimeout, "Give up on a request to the API server (other than a watch) that has had no answer for this long, and retry it; a pod write given up so is waited for a while in case it happened. The default is kube-apiserver's own request timeout; 0: wait as long as it takes.")
	fs.IntVar(&c.BurstReplicas, "burst-replicas", c.BurstReplicas, "Most pod creates, and separately deletes, one DaemonSet sync may issue.")
	fs.IntVar(&c.PodWriters, "pod-writers", c.PodWriters, "Pod creates and deletes sent at once, across all DaemonSets: a sync only queues its pod writes, and these many senders send them, the most urgent first (the client rate limit still applies).")
	fs.DurationVar(&c.MinStatusInterval, "min-status-interval", c.MinStatusInterval, "Shortest time between two writes of a DaemonSet's status that change only its pod counters (changes in between go out together); 0 writes each at once. A new observedGeneration or condition is written at once.")
	fs.DurationVar(&c.MaxStatusHold, "max-status-hold", c.MaxStatusHold, "How long after a DaemonSet's last status write a write that changes only its pod counters may be held while its pod creates and deletes are queued or in flight (they share the client rate limit); it is written as soon as they drain. 0 holds none beyond --min-status-interval. A new observedGeneration or condition is written at once.")
	fs.DurationVar(&c.SyncBatchPeriod, "sync-batch-period", c.SyncBatchPeriod, "Shortest time between two syncs of a DaemonSet that pod and node events ask for: an event after a quiet spell syncs at once, the events of a busy moment share one sync when the period ends (less CPU in rollouts and node churn); 0 syncs on every event. DaemonSet changes sync at once.")
	fs.BoolVar(&c.NodeGate, "node-gate", c.NodeGate, "Remove a node's NoSchedule taint of the key a DaemonSet names in its everynode.dev/node-gate annotation once every DaemonSet gating on that key that should run on the node has an available pod there (needs permission to patch nodes). Off, such DaemonSets get the NodeGateFailure condition instead, and no taint is removed.")
	fs.DurationVar(&c.ProbeTimeout, "conflict-probe-timeout", c.ProbeTimeout, "Full mode: at start, before writing anything, create a DaemonSet that selects no node and wait this long for another DaemonSet controller (kube-controller-manager's, left on) to answer it; if one does, everynode writes to no DaemonSet and says why. 0 skips the probe (another controller's writes are still noticed as they happen).")
	fs.StringVar(&c.ProbeNamespace, "probe-namespace", c.ProbeNamespace, "Namespace of the probe DaemonSet. Default: $POD_NAMESPACE, else default.")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", c.MetricsAddr, `Address serving /metrics, /healthz and /readyz; "0" disables it.`)
	fs.BoolVar(&c.MetricsAuth, "metrics-auth", c.MetricsAuth, "Answer /metrics and /debug/pprof/ only for a bearer token the API server authenticates (TokenReview) whose user may get that path (SubjectAccessReview), as kube-controller-manager's secure port; /healthz and /readyz stay open. Default: true in-cluster, false otherwise.")
	fs.BoolVar(&c.Profiling, "profiling", c.Profiling, "Also serve Go's CPU, heap and goroutine profiles under /debug/pprof/ on --metrics-addr.")
	fs.DurationVar(&c.Resync, "resync", c.Resync, "Informer resync period; 0 disables periodic resync.")
	fs.BoolVar(&c.LeaderElect, "leader-elect", c.LeaderElect, "Run only while holding a coordination.k8s.io Lease, so replicas can stand by. Default: true in-cluster, false otherwise.")
	c.Leader.AddFlags(fs)
}

// Validate reports the first invalid setting, saying how to fix it. The leader
// election settings are checked when leader election is on, or may be turned on by
// default (explicit is false).
func (c *Config) Validate(explicit bool) error {
	switch {
	case c.Mode != ModeFull && c.Mode != ModeCompanion:
		return fmt.Errorf("--mode must be %s or %s, got %q", ModeFull, ModeCompanion, c.Mode)
	case c.Workers < 1:
		return fmt.Errorf("--workers must be at least 1, got %d", c.Workers)
	case c.Burst < 0:
		return fmt.Errorf("--kube-api-burst must not be negative, got %d", c.Burst)
	case c.QPS > 0 && c.Burst < 1:
		return fmt.Errorf("--kube-api-burst must be at least 1 when --kube-api-qps is set, got %d", c.Burst)
	case c.ContentType != ContentTypeProtobuf && c.ContentType != ContentTypeJSON:
		return fmt.Errorf("--kube-api-content-type must be %s or %s, got %q", ContentTypeProtobuf, ContentTypeJSON, c.ContentType)
	case c.RequestTimeout < 0:
		return fmt.Errorf("--kube-api-timeout must not be negative, got %s", c.RequestTimeout)
	case c.BurstReplicas < 1:
		return fmt.Errorf("--burst-replicas must be at least 1, got %d", c.BurstReplicas)
	case c.PodWriters < 1:
		return fmt.Errorf("--pod-writers must be at least 1, got %d", c.PodWriters)
	case c.MinStatusInterval < 0:
		return fmt.Errorf("--min-status-interval must not be negative, got %s", c.MinStatusInterval)
	case c.MaxStatusHold < 0:
		return fmt.Errorf("--max-status-hold must not be negative, got %s", c.MaxStatusHold)
	case c.SyncBatchPeriod < 0:
		return fmt.Errorf("--sync-batch-period must not be negative, got %s", c.SyncBatchPeriod)
	case c.ProbeTimeout < 0:
		return fmt.Errorf("--conflict-probe-timeout must not be negative, got %s", c.ProbeTimeout)
	case c.Resync < 0:
		return fmt.Errorf("--resync must not be negative, got %s", c.Resync)
	}
	if c.LeaderElect || !explicit {
		return c.Leader.Validate()
	}
	return nil
}

// Options are the controller's Options as c sets them, with the client's rate
// limiter (nil: none) and where its measurements go (nil: nowhere).
func (c *Config) Options(limiter flowcontrol.RateLimiter, metrics *Metrics) Options {
	return Options{
		Mode:              c.Mode,
		ProbeTimeout:      c.ProbeTimeout,
		ProbeNamespace:    c.ProbeNamespace,
		BurstReplicas:     c.BurstReplicas,
		PodWriters:        c.PodWriters,
		MinStatusInterval: c.MinStatusInterval,
		MaxStatusHold:     c.MaxStatusHold,
		SyncBatchPeriod:   c.SyncBatchPeriod,
		NodeGate:          c.NodeGate,
		RateLimiter:       limiter,
		Metrics:           metrics,
	}
}
