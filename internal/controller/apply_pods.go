package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/everynode/everynode/internal/daemon"
)

// createPods queues the Plan's creates for the dispatchers (dispatch.go), which send
// them in rank order with every other DaemonSet's, in slow-start batches; they take
// the place of the creates the DaemonSet's last sync queued (writeQueue.replaceCreates).
// Each create is recorded as in flight from the moment it is queued, so no sync
// plans it twice; it starts to expire only once it is sent. It returns the errors of
// the DaemonSet's pod writes since its last sync: the sync fails with them, and is
// retried with back-off.
func (c *Controller) createPods(ctx context.Context, ds *apps.DaemonSet, key string, p *daemon.Plan) error {
	writes := make([]*podWrite, 0, len(p.Creates))
	ranks := newRanker(c.priorities(len(p.Creates)), ds)
	logger := klog.FromContext(ctx)
	for _, create := range p.Creates {
		template := p.Template
		if create.Template != nil {
			template = create.Template
		}
		writes = append(writes, &podWrite{key: key, ds: ds, node: create.Node, logger: logger,
			rank: ranks.rank(template, c.node(create.Node)), create: &create, template: template})
	}
	c.settleWithdrawn(c.writes.replaceCreates(key, writes, c.inflight.expect))
	return errors.Join(c.writes.takeErrors(key)...)
}

// sendCreate sends a queued create, unless it is no longer in flight (a pod for its
// node was seen meanwhile). It returns the create's error, and whether the
// DaemonSet's other creates are to stop without one.
func (c *Controller) sendCreate(ctx context.Context, w *podWrite) (error, bool) {
	if !c.inflight.sending(w) {
		return nil, false
	}
	err := c.createPod(ctx, w.ds, w.template, *w.create)
	if err == nil {
		return nil, false
	}
	c.writeFailed(ctx, w.key, err, func(ctx context.Context) (bool, error) { return c.createHappened(ctx, w.ds, w.node) },
		func() { c.inflight.unknown(w) }, func() { c.inflight.settle(w) })
	if isNamespaceTerminating(err) {
		return nil, true
	}
	return err, false
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

// deletePods queues the Plan's deletes for the dispatchers, ranked as the
// DaemonSet's creates are (a pod in the way of its node's next pod goes out as early
// as that pod would),
// each recorded as in flight from the moment it is queued. Their errors are
// reported by the DaemonSet's next sync (createPods).
func (c *Controller) deletePods(ctx context.Context, ds *apps.DaemonSet, key string, deletes []daemon.PodDelete) error {
	writes := make([]*podWrite, 0, len(deletes))
	ranks := newRanker(c.priorities(len(deletes)), ds)
	logger := klog.FromContext(ctx)
	for _, d := range deletes {
		node, _ := daemon.TargetNode(d.Pod)
		writes = append(writes, &podWrite{key: key, ds: ds, node: node, logger: logger,
			rank: ranks.rank(&ds.Spec.Template, c.node(node)), del: &d})
	}
	c.writes.add(key, writes, c.inflight.expect)
	return nil
}

// sendDelete sends a queued delete, with the pod's UID as precondition, unless it is
// no longer in flight (the pod was seen gone meanwhile). A pod already gone counts
// as deleted.
func (c *Controller) sendDelete(ctx context.Context, w *podWrite) error {
	d := w.del
	if !c.inflight.sending(w) {
		return nil
	}
	err := c.client.CoreV1().Pods(d.Pod.Namespace).Delete(ctx, d.Pod.Name, preconditionUID(d.Pod.UID))
	switch {
	case err == nil:
		c.metrics.podsDeleted.WithLabelValues(string(d.Reason)).Inc()
		klog.FromContext(ctx).V(4).Info("Deleted pod", "pod", klog.KObj(d.Pod), "reason", d.Reason)
		c.recorder.Eventf(w.ds, v1.EventTypeNormal, daemon.EventSuccessfulDelete, "Deleted pod: %v", d.Pod.Name)
	case apierrors.IsNotFound(err):
		c.inflight.settle(w)
	default:
		c.writeFailed(ctx, w.key, err, func(ctx context.Context) (bool, error) { return c.deleteHappened(ctx, d.Pod) },
			func() { c.inflight.unknown(w) }, func() { c.inflight.settle(w) })
		c.recorder.Eventf(w.ds, v1.EventTypeWarning, daemon.EventFailedDelete, "Error deleting: %v", err)
		return fmt.Errorf("deleting pod %s: %w", d.Pod.Name, err)
	}
	return nil
}

// withdrawWrites takes the DaemonSet's queued writes back unsent.
func (c *Controller) withdrawWrites(key string) {
	c.settleWithdrawn(c.writes.withdraw(key))
}

// settleWithdrawn forgets the in-flight records of writes taken back unsent.
func (c *Controller) settleWithdrawn(writes []*podWrite) {
	for _, w := range writes {
		c.inflight.settle(w)
	}
}

// priorities resolves priority class names from the PriorityClass cache, when there
// are writes to rank (n of them).
func (c *Controller) priorities(n int) Priorities {
	if n == 0 || c.classes == nil {
		return Priorities{}
	}
	classes, err := c.classes.List(labels.Everything())
	if err != nil {
		return Priorities{}
	}
	return NewPriorities(classes)
}

// node is the cached node of that name, or nil.
func (c *Controller) node(name string) *v1.Node {
	node, err := c.nodes.lister.Get(name)
	if err != nil {
		return nil
	}
	return node
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
