package controller

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// LeaderConfig configures leader election on a coordination.k8s.io Lease.
type LeaderConfig struct {
	Namespace     string
	Name          string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

func DefaultLeaderConfig() LeaderConfig {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "kube-system"
	}
	return LeaderConfig{
		Namespace:     ns,
		Name:          "everynode",
		LeaseDuration: 15 * time.Second,
		RenewDeadline: 10 * time.Second,
		RetryPeriod:   2 * time.Second,
	}
}

func (c *LeaderConfig) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Namespace, "leader-elect-namespace", c.Namespace, "Namespace of the leader election Lease. Default: $POD_NAMESPACE, else kube-system.")
	fs.StringVar(&c.Name, "leader-elect-lease", c.Name, "Name of the leader election Lease.")
	fs.DurationVar(&c.LeaseDuration, "leader-elect-lease-duration", c.LeaseDuration, "How long a standby waits after the last renewal before taking over.")
	fs.DurationVar(&c.RenewDeadline, "leader-elect-renew-deadline", c.RenewDeadline, "How long the leader keeps trying to renew before it stops leading.")
	fs.DurationVar(&c.RetryPeriod, "leader-elect-retry-period", c.RetryPeriod, "How often candidates try to acquire or renew the Lease.")
}

func (c *LeaderConfig) Validate() error {
	switch {
	case c.Namespace == "" || c.Name == "":
		return errors.New("--leader-elect-namespace and --leader-elect-lease must not be empty")
	case c.RetryPeriod <= 0:
		return fmt.Errorf("--leader-elect-retry-period must be positive, got %s", c.RetryPeriod)
	case c.RenewDeadline <= c.RetryPeriod:
		return fmt.Errorf("--leader-elect-renew-deadline (%s) must be longer than --leader-elect-retry-period (%s)", c.RenewDeadline, c.RetryPeriod)
	case c.LeaseDuration <= c.RenewDeadline:
		return fmt.Errorf("--leader-elect-lease-duration (%s) must be longer than --leader-elect-renew-deadline (%s)", c.LeaseDuration, c.RenewDeadline)
	}
	return nil
}

// RunLeading runs run while this process holds the Lease. Losing the Lease while ctx
// is still live is an error: the process exits so that it restarts as a standby,
// rather than keep acting on state another leader now owns. Every acquisition and
// renewal is recorded on fence, which closes when they stop; client must not be one
// the fence holds back.
func RunLeading(ctx context.Context, client kubernetes.Interface, cfg LeaderConfig, fence *Fence, run func(context.Context) error) error {
	logger := klog.FromContext(ctx)
	host, _ := os.Hostname()
	id := host + "_" + string(uuid.NewUUID())
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, cfg.Namespace, cfg.Name,
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return fmt.Errorf("setting up leader election: %w", err)
	}
	lock = &fencedLock{Interface: lock, fence: fence, clock: fence.clock}
	leadCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var runErr error
	lost := false
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				logger.Info("Acquired leadership", "lease", cfg.Namespace+"/"+cfg.Name, "identity", id)
				runErr = run(ctx)
				cancel()
			},
			OnStoppedLeading: func() {
				fence.Lost()
				if ctx.Err() == nil {
					lost = true
				}
			},
			OnNewLeader: func(current string) {
				if current != id {
					logger.Info("Standing by", "leader", current)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("setting up leader election: %w", err)
	}
	logger.Info("Waiting for leadership", "lease", cfg.Namespace+"/"+cfg.Name, "identity", id)
	elector.Run(leadCtx)
	if runErr != nil {
		return runErr
	}
	if lost {
		return fmt.Errorf("lost the leader election Lease %s/%s", cfg.Namespace, cfg.Name)
	}
	return nil
}

// fencedLock records on a Fence every write of the Lease that keeps this replica its
// holder, timed from before the write was sent: the Lease's own renew time is never
// later than that.
type fencedLock struct {
	resourcelock.Interface
	fence *Fence
	clock clock.PassiveClock
}

func (l *fencedLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.record(r, l.Interface.Create(ctx, r), l.clock.Now())
}

func (l *fencedLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	sent := l.clock.Now()
	return l.record(r, l.Interface.Update(ctx, r), sent)
}

func (l *fencedLock) record(r resourcelock.LeaderElectionRecord, err error, sent time.Time) error {
	switch {
	case err != nil:
	case r.HolderIdentity == l.Identity():
		l.fence.renewedAt(sent)
	default:
		l.fence.Lost() // released
	}
	return err
}
