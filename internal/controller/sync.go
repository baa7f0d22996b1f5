package controller

import (
	"context"
	"fmt"
	"time"

	apps "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/everynode/everynode/internal/daemon"
	"github.com/everynode/everynode/internal/gather"
)

// sync brings one DaemonSet a step closer to its spec: it reads a snapshot from the
// caches, lets the core decide, and applies the plan. It returns when to look again
// even if nothing changes (zero: only on events).
//
// Its summary line is logged at verbosity 2 when the plan wrote something and at 4
// otherwise.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	logger := klog.FromContext(ctx).WithValues("daemonset", key)
	ctx = klog.NewContext(ctx, logger)
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil // not a key of ours; retrying cannot help
	}
	ds, err := c.dsLister.DaemonSets(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		logger.V(3).Info("DaemonSet is gone")
		c.forget(key)
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading DaemonSet %s from cache: %w", key, err)
	}
	if isProbe(ds) {
		return 0, nil // the probe for another controller: its answer is read elsewhere
	}
	ds = c.written.freshest(key, ds)
	if w, ok := c.foreign.contestedBy(key); ok {
		c.withdrawWrites(key)
		return 0, c.standDown(ctx, ds, key, w)
	}

	companion := c.opts.Mode == ModeCompanion
	if companion && !daemon.CompanionManages(ds) {
		logger.V(5).Info("Not a DaemonSet companion mode manages: the cluster's own controller rolls it out")
		c.forget(key)
		return 0, nil
	}
	var prev *daemon.Memo
	if !companion {
		prev = c.memos.get(key)
	}
	snap, err := c.snapshot(ds, key, prev)
	if err != nil {
		return 0, err
	}
	var plan daemon.Plan
	incremental, looked := false, 0
	if companion {
		plan = daemon.DecideUpdate(snap)
	} else {
		var memo *daemon.Memo
		plan, memo = daemon.DecideWith(snap, prev)
		c.memos.set(key, memo)
		incremental = prev != nil && memo == prev
		looked = memo.Looked() // 0 for a new memo or none
	}
	c.metrics.observeDecision(incremental)
	start := c.clock.Now()
	err = c.apply(ctx, ds, key, &plan)
	level := 4
	if plan.Writes() > 0 {
		level = 2
	}
	logger.V(level).Info("Synced DaemonSet",
		"nodes", len(snap.Nodes), "pods", len(snap.Pods), "hash", plan.Hash, "incremental", incremental, "nodesLooked", looked,
		"creates", len(plan.Creates), "deletes", len(plan.Deletes), "updatesInPlace", len(plan.Updates),
		"statusWritten", plan.Status != nil || len(plan.Conditions) > 0, "requeueAfter", plan.RequeueAfter,
		"applyTime", c.clock.Since(start), "err", err)
	return plan.RequeueAfter, err
}

// snapshot reads what Decide needs for ds from the caches, and, when memo is set,
// which nodes and pods changed since the snapshot it was last used with.
func (c *Controller) snapshot(ds *apps.DaemonSet, key string, memo *daemon.Memo) (*daemon.Snapshot, error) {
	// The writes in flight are read before the cache: a handler forgets a write only
	// after the cache (for pods, podIndex) shows it, so every write missing from this
	// view is in the lists below. Read the other way round, a pod added in between
	// would be in neither, and its node would get a second one.
	//
	// The creates still queued that the Plan replaces are read first of all, and
	// decided as if not in flight (writeQueue.queued).
	queued := c.writes.queued(key)
	inflight, refused := withoutQueued(c.inflight.view(key), queued), c.inflight.refusedUpdates(key)
	from := memo.At()
	nodes, nodesAt, changedNodes, nodesOK := c.nodes.read(from.Nodes, memo != nil)
	pods, podsAt, changedPods, podsOK := c.podIndex.read([]string{string(ds.UID), orphanKey(ds.Namespace)}, from.Pods, memo != nil)
	revisions, err := c.revLister.ControllerRevisions(ds.Namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing controller revisions from cache: %w", err)
	}
	snap := gather.Snapshot(ds, gather.Objects{Nodes: nodes, Pods: pods, Revisions: revisions}, c.clock.Now(), gather.Controller{
		InFlight:       inflight,
		InPlaceRefused: refused,
		Backoff:        c.backoff.view(key, ds.Generation),
		Failures:       c.backoff.failures(key, ds.Generation),
		MaxCreates:     c.opts.BurstReplicas,
		MaxDeletes:     c.opts.BurstReplicas,
		Eligibility:    c.elig.get(key, ds),
	})
	snap.At = daemon.Position{Nodes: nodesAt, Pods: podsAt}
	if nodesOK && podsOK {
		snap.Changes = &daemon.Changes{From: from, Nodes: changedNodes, Pods: changedPods}
	}
	return snap, nil
}

// withoutQueued is f without the creates still queued.
func withoutQueued(f daemon.InFlight, queued []*podWrite) daemon.InFlight {
	for _, w := range queued {
		delete(f.Creates, w.node)
	}
	return f
}
