package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/everynode/everynode/internal/daemon"
)

// nodeGate runs the node gate (daemon/nodegate.go) in either mode: it removes a
// node's NoSchedule taint of a gate key once every DaemonSet gating on that key that
// should run there has an available pod on it, and it keeps a DaemonSet whose gate
// cannot work (an invalid key, a template that does not tolerate its own taint, the
// gate turned off) marked so, with a Warning event and the NodeGateFailure condition.
//
// It has its own queue, of nodes to decide for and of gating DaemonSets to check,
// fed by its own handlers on the controller's informers: a node is looked at when it
// gets a gated taint or its labels change, when a pod of a gating DaemonSet on it
// changes, and when a gating DaemonSet changes; never on heartbeats. Its writes (a
// JSON patch of the node's taints, a strategic merge patch of the DaemonSet's
// condition) go through the controller's client, so the fence and the rate limit
// hold for them too.
type nodeGate struct {
	// on: the gate removes taints. Off, it only marks gating DaemonSets so.
	on       bool
	client   kubernetes.Interface
	manager  string
	clock    clock.Clock
	recorder record.EventRecorder
	ds       appslisters.DaemonSetLister
	nodes    corelisters.NodeLister
	pods     *podIndex
	// token, if set, takes the client rate limiter's next token for a taint
	// removal, ahead of the queued pod writes (writeQueue.takeToken); false: the
	// removal waits for a token of its own.
	token func() bool
	queue workqueue.TypedRateLimitingInterface[gateItem]

	mu sync.RWMutex
	// gates holds the DaemonSets with the node-gate annotation, by key.
	gates map[string]gating
}

// gating is a DaemonSet's gate as the handlers last saw it.
type gating struct {
	uid        types.UID
	generation int64
	gate       daemon.NodeGate
}

// gateItem is a node to decide for, or a gating DaemonSet to check.
type gateItem struct {
	node      string
	daemonSet string
}

// Reasons of the NodeGateFailure condition and its events.
const (
	// ReasonNodeGateOff: the DaemonSet gates nodes, but this everynode runs with the
	// gate off (--node-gate=false).
	ReasonNodeGateOff = "NodeGateOff"
)

// gateDeps are what the gate reads and writes through.
type gateDeps struct {
	client   kubernetes.Interface
	manager  string
	clock    clock.WithTicker
	recorder record.EventRecorder
	ds       appslisters.DaemonSetLister
	nodes    corelisters.NodeLister
	pods     *podIndex
	token    func() bool
}

func newNodeGate(on bool, d gateDeps) *nodeGate {
	return &nodeGate{
		on: on, client: d.client, manager: d.manager, clock: d.clock, recorder: d.recorder,
		ds: d.ds, nodes: d.nodes, pods: d.pods, token: d.token,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[gateItem](),
			workqueue.TypedRateLimitingQueueConfig[gateItem]{Name: "everynode-node-gate", Clock: d.clock},
		),
		gates: map[string]gating{},
	}
}

// run processes the gate's queue until ctx ends.
func (g *nodeGate) run(ctx context.Context) {
	go func() { <-ctx.Done(); g.queue.ShutDown() }()
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		for g.processNext(ctx) {
		}
	}, 0)
}

func (g *nodeGate) processNext(ctx context.Context) bool {
	item, quit := g.queue.Get()
	if quit {
		return false
	}
	defer g.queue.Done(item)
	var err error
	if item.node != "" {
		err = g.decide(ctx, item.node)
	} else {
		err = g.check(ctx, item.daemonSet)
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Node gate failed, will retry", "node", item.node, "daemonset", item.daemonSet)
		g.queue.AddRateLimited(item)
		return true
	}
	g.queue.Forget(item)
	return true
}

// members returns the DaemonSets gating on key, each with its pods on node.
func (g *nodeGate) members(key, node string) []daemon.GateMember {
	g.mu.RLock()
	var names []string
	for name, x := range g.gates {
		if x.gate.Key == key {
			names = append(names, name)
		}
	}
	g.mu.RUnlock()
	var out []daemon.GateMember
	for _, name := range names {
		ns, n, _ := cache.SplitMetaNamespaceKey(name)
		ds, err := g.ds.DaemonSets(ns).Get(n)
		if err != nil || ds.DeletionTimestamp != nil {
			continue
		}
		out = append(out, daemon.GateMember{DaemonSet: ds, Gate: daemon.ParseNodeGate(ds), Pods: g.pods.onNode(string(ds.UID), node)})
	}
	return out
}

// gated reports whether some DaemonSet gates on a NoSchedule taint of node.
func (g *nodeGate) gated(node *v1.Node) bool {
	keys := daemon.GateKeys(node)
	if len(keys) == 0 {
		return false
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	for _, x := range g.gates {
		for _, k := range keys {
			if x.gate.Key == k {
				return true
			}
		}
	}
	return false
}

// decide removes the node's gate taints whose gates are open, and looks again when
// a gating pod's minReadySeconds will have passed.
func (g *nodeGate) decide(ctx context.Context, name string) error {
	node, err := g.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	var open []string
	for _, key := range daemon.GateKeys(node) {
		members := g.members(key, name)
		if len(members) == 0 {
			continue // not a gate: no DaemonSet gates on the key
		}
		v := daemon.DecideGate(node, key, members, g.clock.Now())
		if !v.Open {
			klog.FromContext(ctx).V(4).Info("Node gate stays", "node", klog.KObj(node), "key", key, "reason", v.Reason, "message", v.Message)
			if v.RecheckAfter > 0 {
				g.queue.AddAfter(gateItem{node: name}, v.RecheckAfter)
			}
			continue
		}
		open = append(open, key)
	}
	if len(open) == 0 {
		return nil
	}
	// The open gates' taints go in one patch: the indexes of a second would be the
	// cache's, from before the first.
	if err := g.removeTaints(ctx, node, open); err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Node gate opened", "node", klog.KObj(node), "keys", open,
		"sinceNodeCreated", g.clock.Since(node.CreationTimestamp.Time).Round(time.Millisecond))
	return nil
}

// check keeps ds's NodeGateFailure condition true, with a Warning event when it
// comes or changes, while its gate cannot work, and removes it once it can.
func (g *nodeGate) check(ctx context.Context, key string) error {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	ds, err := g.ds.DaemonSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	reason, problem := g.problem(ds)
	have := daemon.Condition(ds.Status.Conditions, daemon.ConditionNodeGate)
	switch {
	case problem == "" && have == nil:
		return nil
	case problem == "":
		return g.patchCondition(ctx, ds, map[string]any{"type": daemon.ConditionNodeGate, "$patch": "delete"})
	case have != nil && have.Status == v1.ConditionTrue && have.Reason == reason && have.Message == problem:
		return nil
	}
	g.recorder.Event(ds, v1.EventTypeWarning, reason, problem)
	return g.patchCondition(ctx, ds, map[string]any{
		"type": daemon.ConditionNodeGate, "status": v1.ConditionTrue, "reason": reason, "message": problem,
		"lastTransitionTime": metav1.NewTime(g.clock.Now()),
	})
}

// problem is why ds's gate cannot work, and the reason to say it with; "" when it
// can, or ds gates nothing.
func (g *nodeGate) problem(ds *apps.DaemonSet) (string, string) {
	gate := daemon.ParseNodeGate(ds)
	switch {
	case gate.Problem != "":
		return string(daemon.ReasonNodeGateInvalid), gate.Problem
	case gate.Key != "" && !g.on:
		return ReasonNodeGateOff, fmt.Sprintf("annotation %s=%q: everynode runs with --node-gate=false (the chart's nodeGate.enabled: false), so no node's taint %s is removed; turn the gate on, or remove the annotation",
			daemon.AnnotationNodeGate, gate.Key, gate.Key)
	}
	return "", ""
}

// daemonSetChanged records ds's gate (gone: ds was deleted) and asks for what its
// change may change: its condition, and the nodes tainted with its old or new key.
func (g *nodeGate) daemonSetChanged(ds *apps.DaemonSet, gone bool) {
	key := cache.MetaObjectToName(ds).String()
	_, annotated := ds.Annotations[daemon.AnnotationNodeGate]
	cur := gating{uid: ds.UID, generation: ds.Generation}
	if annotated && !gone {
		cur.gate = daemon.ParseNodeGate(ds)
	}
	g.mu.Lock()
	prev, had := g.gates[key]
	if annotated && !gone {
		g.gates[key] = cur
	} else {
		delete(g.gates, key)
	}
	g.mu.Unlock()
	if !had && (!annotated || gone) {
		return // the common case: no gate, before or now
	}
	if !gone && (prev != cur || daemon.Condition(ds.Status.Conditions, daemon.ConditionNodeGate) != nil || !had) {
		g.queue.Add(gateItem{daemonSet: key})
	}
	if g.on && (prev != cur || gone) {
		g.wakeTainted(prev.gate.Key, cur.gate.Key)
	}
}

// wakeTainted asks for a decision on every node with a NoSchedule taint of one of keys.
func (g *nodeGate) wakeTainted(keys ...string) {
	nodes, err := g.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	for _, n := range nodes {
		for _, k := range keys {
			if k != "" && len(daemon.GateTaints(n, k)) > 0 {
				g.queue.Add(gateItem{node: n.Name})
				break
			}
		}
	}
}

// nodeChanged asks for a decision on a node that got a gated taint or new labels
// (which may change which gating DaemonSets should run there).
func (g *nodeGate) nodeChanged(old, cur *v1.Node) {
	if !g.on || !g.gated(cur) {
		return
	}
	if old == nil || !apiequality.Semantic.DeepEqual(old.Spec.Taints, cur.Spec.Taints) ||
		!apiequality.Semantic.DeepEqual(old.Labels, cur.Labels) {
		g.queue.Add(gateItem{node: cur.Name})
	}
}

// podChanged asks for a decision on the node of a gating DaemonSet's pod, if the
// node is gated.
func (g *nodeGate) podChanged(obj any) {
	pod, ok := unwrap[*v1.Pod](obj)
	if !g.on || !ok {
		return
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != "DaemonSet" {
		return
	}
	g.mu.RLock()
	x, gating := g.gates[pod.Namespace+"/"+ref.Name]
	g.mu.RUnlock()
	if !gating || x.uid != ref.UID || x.gate.Key == "" {
		return
	}
	name, ok := daemon.TargetNode(pod)
	if !ok {
		return
	}
	if node, err := g.nodes.Get(name); err == nil && len(daemon.GateTaints(node, x.gate.Key)) > 0 {
		g.queue.Add(gateItem{node: name})
	}
}

// handlers are the gate's event handlers on the DaemonSet and node informers. Pod
// events come through the controller's pod handler (podChanged), after it has put
// the pod in the pod index the gate reads.
func (g *nodeGate) handlers() (daemonSets, nodes cache.ResourceEventHandler) {
	daemonSets = cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if ds, ok := obj.(*apps.DaemonSet); ok {
				g.daemonSetChanged(ds, false)
			}
		},
		UpdateFunc: func(_, obj any) {
			if ds, ok := obj.(*apps.DaemonSet); ok {
				g.daemonSetChanged(ds, false)
			}
		},
		DeleteFunc: func(obj any) {
			if ds, ok := unwrap[*apps.DaemonSet](obj); ok {
				g.daemonSetChanged(ds, true)
			}
		},
	}
	nodes = cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*v1.Node); ok {
				g.nodeChanged(nil, n)
			}
		},
		UpdateFunc: func(oldObj, obj any) {
			old, ok1 := oldObj.(*v1.Node)
			cur, ok2 := obj.(*v1.Node)
			if ok1 && ok2 {
				g.nodeChanged(old, cur)
			}
		},
	}
	return daemonSets, nodes
}
