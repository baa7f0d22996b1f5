package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/everynode/everynode/internal/daemon"
)

// createPods creates the Plan's pods in slow-start batches of 1, 2, 4, ...: when a
// batch has a failure the rest are not attempted, so a quota or admission problem
// costs a few requests, not hundreds. Each create is recorded as in flight before it
// is sent and forgotten if it fails, or kept for a while if it may have happened
// (writeFailed).
func (c *Controller) createPods(ctx context.Context, ds *apps.DaemonSet, key string, p *daemon.Plan) error {
	logger := klog.FromContext(ctx)
	var (
		mu   sync.Mutex
		errs []error
	)
	for pos, batch := 0, 1; pos < len(p.Creates); pos, batch = pos+batch, batch*2 {
		end := min(pos+batch, len(p.Creates))
		var wg sync.WaitGroup
		failed := false
		for _, create := range p.Creates[pos:end] {
			c.inflight.expectCreate(key, create.Node)
			wg.Go(func() {
				template := p.Template
				if create.Template != nil {
					template = create.Template
				}
				err := c.createPod(ctx, ds, template, create)
				if err == nil {
					return
				}
				c.writeFailed(ctx, key, err, func(ctx context.Context) (bool, error) { return c.createHappened(ctx, ds, create.Node) },
					func() { c.inflight.createUnknown(key, create.Node) }, func() { c.inflight.createDone(key, create.Node) })
				if isNamespaceTerminating(err) {
					return
				}
				mu.Lock()
				errs, failed = append(errs, err), true
				mu.Unlock()
			})
		}
		wg.Wait()
		if failed {
			if skipped := len(p.Creates) - end; skipped > 0 {
				logger.V(2).Info("Create failed, skipping the rest of this sync's creates", "skipped", skipped)
			}
			break
		}
	}
	return errors.Join(errs...)
}

func (c *Controller) createPod(ctx context.Context, ds *apps.DaemonSet, template *v1.PodTemplateSpec, create daemon.PodCreate) error {
	pod := daemon.PodForNode(ds, template, create.Node)
	daemon.SetFailedBefore(pod, create.FailedBefore)
	created, err := c.client.CoreV1().Pods(ds.Namespace).Create(ctx, pod, metav1.CreateOptions{FieldManager: c.fieldManager})
	if err != nil {
		if !isNamespaceTerminating(err) {
			c.recorder.Eventf(ds, v1.EventTypeWarning, daemon.EventFailedCreate, "Error creating: %v", err)
		}
		return fmt.Errorf("creating pod for node %s: %w", create.Node, err)
	}
	c.metrics.podsCreated.WithLabelValues(string(create.Reason)).Inc()
	klog.FromContext(ctx).V(4).Info("Created pod", "pod", klog.KObj(created), "node", create.Node, "reason", create.Reason)
	c.recorder.Eventf(ds, v1.EventTypeNormal, daemon.EventSuccessfulCreate, "Created pod: %v", created.Name)
	return nil
}

// deletePods deletes the Plan's pods in parallel, each with its UID as precondition.
// A pod already gone counts as deleted.
func (c *Controller) deletePods(ctx context.Context, ds *apps.DaemonSet, key string, deletes []daemon.PodDelete) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, d := range deletes {
		c.inflight.expectDelete(key, d.Pod.UID)
		wg.Go(func() {
			err := c.client.CoreV1().Pods(d.Pod.Namespace).Delete(ctx, d.Pod.Name, preconditionUID(d.Pod.UID))
			switch {
			case err == nil:
				c.metrics.podsDeleted.WithLabelValues(string(d.Reason)).Inc()
				klog.FromContext(ctx).V(4).Info("Deleted pod", "pod", klog.KObj(d.Pod), "reason", d.Reason)
				c.recorder.Eventf(ds, v1.EventTypeNormal, daemon.EventSuccessfulDelete, "Deleted pod: %v", d.Pod.Name)
			case apierrors.IsNotFound(err):
				c.inflight.deleteDone(key, d.Pod.UID)
			default:
				c.writeFailed(ctx, key, err, func(ctx context.Context) (bool, error) { return c.deleteHappened(ctx, d.Pod) },
					func() { c.inflight.deleteUnknown(key, d.Pod.UID) }, func() { c.inflight.deleteDone(key, d.Pod.UID) })
				c.recorder.Eventf(ds, v1.EventTypeWarning, daemon.EventFailedDelete, "Error deleting: %v", err)
				mu.Lock()
				errs = append(errs, fmt.Errorf("deleting pod %s: %w", d.Pod.Name, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// writeFailed settles the in-flight record of a pod write that failed with err. One
// whose outcome is unknown (outcomeUnknown) is checked with the API server
// (happened): if it was carried out it stays in flight until the cache shows it; if
// the check fails too, it stays in flight for a while (unknown), and the DaemonSet is
// looked at again when that lapses. Any other is forgotten (done), to be decided
// again.
func (c *Controller) writeFailed(ctx context.Context, key string, err error, happened func(context.Context) (bool, error), unknown, done func()) {
	if !outcomeUnknown(err) {
		done()
		return
	}
	logger := klog.FromContext(ctx)
	did, checkErr := happened(ctx)
	switch {
	case checkErr != nil:
		logger.V(2).Info("Pod write failed with an unknown outcome, which could not be checked; waiting for the cache to show it", "err", err, "checkErr", checkErr)
		unknown()
		c.queue.AddAfter(key, unknownOutcomeTTL+time.Second)
	case did:
		logger.V(2).Info("Pod write failed with an unknown outcome but was carried out; waiting for the cache to show it", "err", err)
	default:
		done()
	}
}
