package controller

import (
	"context"
	"fmt"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
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
	var plan daemon.Plan
	var how decided
	if companion {
		snap, err := c.snapshot(ds, key, nil, true)
		if err != nil {
			return 0, err
		}
		plan, how.nodes = daemon.DecideUpdate(snap), len(snap.Nodes)
	} else if plan, how, err = c.decide(ds, key); err != nil {
		return 0, err
	}
	c.metrics.observeDecision(how.incremental)
	start := c.clock.Now()
	err = c.apply(ctx, ds, key, &plan)
	level := 4
	if plan.Writes() > 0 {
		level = 2
	}
	logger.V(level).Info("Synced DaemonSet",
		"nodes", how.nodes, "hash", plan.Hash, "incremental", how.incremental, "nodesLooked", how.memo.Looked(),
		"creates", len(plan.Creates), "deletes", len(plan.Deletes), "updatesInPlace", len(plan.Updates),
		"statusWritten", plan.Status != nil || len(plan.Conditions) > 0, "requeueAfter", plan.RequeueAfter,
		"applyTime", c.clock.Since(start), "err", err)
	return plan.RequeueAfter, err
}

// decided is how a decision was made, for the sync's log and metrics.
type decided struct {
	memo        *daemon.Memo // the Memo kept after it (nil: none)
	incremental bool         // made from the Memo kept before
	nodes       int          // the nodes it was made over
}

// decide makes the decision of full mode for ds and keeps its Memo: from the Memo and
// the caches' changes since its snapshot alone when it can (reading no list of nodes
// or pods, whose copies grow with the cluster), else from the whole snapshot.
func (c *Controller) decide(ds *apps.DaemonSet, key string) (daemon.Plan, decided, error) {
	prev := c.memos.get(key)
	if prev != nil {
		snap, err := c.snapshot(ds, key, prev, false)
		if err != nil {
			return daemon.Plan{}, decided{}, err
		}
		if snap.Changes != nil {
			if plan, ok := daemon.DecideFromMemo(snap, prev); ok {
				return plan, decided{memo: prev, incremental: true, nodes: prev.Nodes()}, nil
			}
			prev = nil // it can no longer be trusted
		}
	}
	snap, err := c.snapshot(ds, key, prev, true)
	if err != nil {
		return daemon.Plan{}, decided{}, err
	}
	plan, memo := daemon.DecideWith(snap, prev)
	c.memos.set(key, memo)
	return plan, decided{memo: memo, incremental: prev != nil && memo == prev, nodes: len(snap.Nodes)}, nil
}

// snapshot reads what Decide needs for ds from the caches, and, when memo is set,
// which nodes and pods changed since the snapshot it was last used with. Without
// lists it leaves out the nodes and pods themselves (for DecideFromMemo), and when
// the changes cannot be named either, also leaves Changes nil.
func (c *Controller) snapshot(ds *apps.DaemonSet, key string, memo *daemon.Memo, lists bool) (*daemon.Snapshot, error) {
	// The writes in flight are read before the cache: a handler forgets a write only
	// after the cache (for pods, podIndex) shows it, so every write missing from this
	// view is in the lists below. Read the other way round, a pod added in between
	// would be in neither, and its node would get a second one.
	//
	// The queue is noted first of all (writeQueue.begin): the creates still queued for
	// the nodes decided again are decided as if not in flight, and the Plan replaces
	// them.
	c.writes.begin(key)
	inflight, refused := c.inflight.view(key), c.inflight.refusedUpdates(key)
	from := memo.At()
	podKeys := []string{string(ds.UID), orphanKey(ds.Namespace)}
	var nodes []*v1.Node
	var pods []*v1.Pod
	var nodesAt, podsAt uint64
	var changedNodes map[string]*v1.Node
	var changedPods map[types.UID]*v1.Pod
	var nodesOK, podsOK bool
	if lists {
		nodes, nodesAt, changedNodes, nodesOK = c.nodes.read(from.Nodes, memo != nil)
		pods, podsAt, changedPods, podsOK = c.podIndex.read(podKeys, from.Pods, memo != nil)
	} else {
		nodesAt, changedNodes, nodesOK = c.nodes.changes(from.Nodes)
		podsAt, changedPods, podsOK = c.podIndex.changes(podKeys, from.Pods)
	}
	// A decision from the memo and the changes decides again only the nodes whose
	// objects changed: the queued creates of the others stay as they are.
	var again map[string]bool // nil: every node
	if !lists && nodesOK && podsOK {
		again = changedNodeNames(changedNodes, changedPods)
	}
	c.inflight.hideCreates(key, &inflight, c.writes.decideAgain(key, again))
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

// changedNodeNames names the nodes whose objects changed: the changed nodes, and
// the nodes of the changed pods still there.
func changedNodeNames(nodes map[string]*v1.Node, pods map[types.UID]*v1.Pod) map[string]bool {
	out := make(map[string]bool, len(nodes)+len(pods))
	for name := range nodes {
		out[name] = true
	}
	for _, pod := range pods {
		if pod == nil {
			continue
		}
		if name, ok := daemon.TargetNode(pod); ok {
			out[name] = true
		}
	}
	return out
}
