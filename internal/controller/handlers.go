package controller

import (
	"maps"
	"reflect"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/everynode/everynode/internal/daemon"
)

// Event handlers: they read the caches, track observed writes and enqueue keys. They
// never call the API and never decide anything beyond which DaemonSets to look at.

func (c *Controller) enqueue(ds *apps.DaemonSet) {
	c.queue.Add(cache.MetaObjectToName(ds).String())
}

// enqueueBatched asks for a sync of ds that the sync batcher spaces out: at once
// after a quiet period, else when the period since the last sync ends.
func (c *Controller) enqueueBatched(ds *apps.DaemonSet) {
	key := cache.MetaObjectToName(ds).String()
	if d := c.batch.delay(key); d > 0 {
		c.queue.AddAfter(key, d)
		return
	}
	c.queue.Add(key)
}

// unwrap returns the object of a delete notification, which may be a tombstone.
func unwrap[T any](obj interface{}) (T, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	v, ok := obj.(T)
	return v, ok
}

func (c *Controller) daemonSetHandler(logger klog.Logger) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if ds, ok := obj.(*apps.DaemonSet); ok {
				logger.V(4).Info("DaemonSet added", "daemonset", klog.KObj(ds))
				c.foreign.daemonSetSeen(cache.MetaObjectToName(ds).String(), ds)
				c.enqueue(ds)
			}
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			old, ok1 := oldObj.(*apps.DaemonSet)
			cur, ok2 := newObj.(*apps.DaemonSet)
			if !ok1 || !ok2 {
				return
			}
			if old.UID != cur.UID {
				// Deleted and recreated under the same name between two watches.
				c.forgetDaemonSet(old)
			}
			if c.foreign.daemonSetSeen(cache.MetaObjectToName(cur).String(), cur) {
				logger.V(2).Info("DaemonSet status written by another controller", "daemonset", klog.KObj(cur))
				c.enqueue(cur)
				return
			}
			if statusOnly(old, cur) {
				logger.V(5).Info("DaemonSet status changed; nothing to do", "daemonset", klog.KObj(cur))
				return
			}
			c.enqueue(cur)
		},
		DeleteFunc: func(obj interface{}) {
			ds, ok := unwrap[*apps.DaemonSet](obj)
			if !ok {
				return
			}
			logger.V(4).Info("DaemonSet deleted", "daemonset", klog.KObj(ds))
			c.foreign.daemonSetGone(cache.MetaObjectToName(ds).String(), ds.UID)
			c.forgetDaemonSet(ds)
			c.enqueue(ds)
		},
	}
}

// statusOnly reports whether an update changed nothing but the DaemonSet's status,
// such as the controller's own status writes: a sync would find nothing new. A new
// collision count does need one (the next revision needs a new name), and a resync
// (same resourceVersion) is passed on as the safety net it is meant to be.
func statusOnly(old, cur *apps.DaemonSet) bool {
	return old.ResourceVersion != cur.ResourceVersion && old.UID == cur.UID &&
		old.Generation == cur.Generation && cur.DeletionTimestamp.Equal(old.DeletionTimestamp) &&
		maps.Equal(old.Annotations, cur.Annotations) && maps.Equal(old.Labels, cur.Labels) &&
		ptr.Equal(old.Status.CollisionCount, cur.Status.CollisionCount)
}

// sameControllerRef reports whether two controller references, either of them nil,
// are equal field by field: what reflect.DeepEqual would say, without reflection, on
// every pod update.
func sameControllerRef(a, b *metav1.OwnerReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.UID == b.UID && a.Name == b.Name && a.Kind == b.Kind && a.APIVersion == b.APIVersion &&
		ptr.Equal(a.Controller, b.Controller) && ptr.Equal(a.BlockOwnerDeletion, b.BlockOwnerDeletion)
}

func (c *Controller) forgetDaemonSet(ds *apps.DaemonSet) {
	c.forget(cache.MetaObjectToName(ds).String())
}

// owner returns the DaemonSet a ControllerRef points to, if it is still the same one.
func (c *Controller) owner(namespace string, ref *metav1.OwnerReference) *apps.DaemonSet {
	if ref == nil || ref.Kind != "DaemonSet" {
		return nil
	}
	ds, err := c.dsLister.DaemonSets(namespace).Get(ref.Name)
	if err != nil || ds.UID != ref.UID {
		return nil
	}
	return ds
}

// selecting returns the DaemonSets of namespace whose selector matches set: the
// candidates to adopt an orphan.
func (c *Controller) selecting(namespace string, set labels.Set) []*apps.DaemonSet {
	all, err := c.dsLister.DaemonSets(namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []*apps.DaemonSet
	for _, ds := range all {
		sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
		if err != nil || sel.Empty() {
			continue
		}
		if sel.Matches(set) {
			out = append(out, ds)
		}
	}
	return out
}

// podHandler keeps the pod index and wakes the DaemonSets a pod event concerns. The
// cache holds a pod another kind of controller controls as metadata only (cachedPod),
// so an update may carry a *v1.Pod on one side and a PartialObjectMetadata on the
// other: everything but the index and a new pod's node is read from the metadata.
func (c *Controller) podHandler(logger klog.Logger) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			pod, ok := obj.(*v1.Pod)
			if !ok {
				return // another controller's pod: nothing of ours to wake
			}
			c.podIndex.put(pod)
			c.gate.podChanged(pod)
			if ds := c.owner(pod.Namespace, metav1.GetControllerOfNoCopy(pod)); ds != nil {
				key := cache.MetaObjectToName(ds).String()
				if node, ok := daemon.TargetNode(pod); ok {
					c.inflight.createDone(key, node)
				}
				if pod.DeletionTimestamp != nil {
					c.inflight.deleteDone(key, pod.UID)
				}
				if c.foreign.podAdded(key, pod) {
					logger.V(2).Info("Pod created by another controller", "pod", klog.KObj(pod), "daemonset", klog.KObj(ds))
				}
				logger.V(4).Info("Pod added", "pod", klog.KObj(pod), "daemonset", klog.KObj(ds))
				c.enqueueBatched(ds)
				return
			}
			if metav1.GetControllerOfNoCopy(pod) == nil && pod.DeletionTimestamp == nil {
				for _, ds := range c.selecting(pod.Namespace, pod.Labels) {
					c.enqueueBatched(ds)
				}
			}
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			old, ok1 := oldObj.(metav1.Object)
			cur, ok2 := newObj.(metav1.Object)
			if !ok1 || !ok2 {
				return
			}
			if pod, whole := newObj.(*v1.Pod); whole {
				c.podIndex.put(pod)
			} else {
				c.podIndex.remove(cur.GetUID())
			}
			c.gate.podChanged(newObj)
			// Only a pod's add can be another controller's create.
			c.foreign.podGone(cur.GetUID())
			if old.GetResourceVersion() == cur.GetResourceVersion() {
				return
			}
			oldRef, curRef := metav1.GetControllerOfNoCopy(old), metav1.GetControllerOfNoCopy(cur)
			if !sameControllerRef(oldRef, curRef) {
				if ds := c.owner(old.GetNamespace(), oldRef); ds != nil {
					c.enqueueBatched(ds)
				}
			}
			if ds := c.owner(cur.GetNamespace(), curRef); ds != nil {
				key := cache.MetaObjectToName(ds).String()
				if cur.GetDeletionTimestamp() != nil {
					c.inflight.deleteDone(key, cur.GetUID())
				}
				c.inflight.updateSeen(key, cur.GetUID(), cur.GetLabels()[daemon.HashLabel])
				c.enqueueBatched(ds)
				return
			}
			if curRef == nil && (!reflect.DeepEqual(old.GetLabels(), cur.GetLabels()) || oldRef != nil) {
				for _, ds := range c.selecting(cur.GetNamespace(), cur.GetLabels()) {
					c.enqueueBatched(ds)
				}
			}
		},
		DeleteFunc: func(obj interface{}) {
			pod, ok := unwrap[metav1.Object](obj)
			if !ok {
				return
			}
			c.podIndex.remove(pod.GetUID())
			c.gate.podChanged(obj)
			c.foreign.podGone(pod.GetUID())
			if ds := c.owner(pod.GetNamespace(), metav1.GetControllerOfNoCopy(pod)); ds != nil {
				key := cache.MetaObjectToName(ds).String()
				c.inflight.deleteDone(key, pod.GetUID())
				c.inflight.updateDone(key, pod.GetUID())
				logger.V(4).Info("Pod deleted", "pod", klog.KObj(pod), "daemonset", klog.KObj(ds))
				c.enqueueBatched(ds)
			}
		},
	}
}

func (c *Controller) revisionHandler(logger klog.Logger) cache.ResourceEventHandler {
	wake := func(r *apps.ControllerRevision) {
		if ref := metav1.GetControllerOfNoCopy(r); ref != nil {
			if ds := c.owner(r.Namespace, ref); ds != nil {
				c.enqueue(ds)
			}
			return
		}
		for _, ds := range c.selecting(r.Namespace, r.Labels) {
			c.enqueue(ds)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if r, ok := obj.(*apps.ControllerRevision); ok {
				wake(r)
			}
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			old, ok1 := oldObj.(*apps.ControllerRevision)
			cur, ok2 := newObj.(*apps.ControllerRevision)
			if !ok1 || !ok2 || old.ResourceVersion == cur.ResourceVersion {
				return
			}
			if oldRef := metav1.GetControllerOfNoCopy(old); oldRef != nil && !sameControllerRef(oldRef, metav1.GetControllerOfNoCopy(cur)) {
				if ds := c.owner(old.Namespace, oldRef); ds != nil {
					c.enqueue(ds)
				}
			}
			wake(cur)
		},
		DeleteFunc: func(obj interface{}) {
			r, ok := unwrap[*apps.ControllerRevision](obj)
			if !ok {
				return
			}
			if ds := c.owner(r.Namespace, metav1.GetControllerOfNoCopy(r)); ds != nil {
				logger.V(4).Info("ControllerRevision deleted", "revision", klog.KObj(r))
				c.enqueue(ds)
			}
		},
	}
}

// nodeHandler wakes only the DaemonSets whose verdict for the node changes: a new node
// wakes those that should run there; an update wakes those for which the node's labels
// or taints change the answer, whose rollout reads the relabelled node's labels,
// whose rollout leaves sick nodes alone when the node falls sick or recovers, or
// that may run there when it starts shutting down or recovers (other status changes
// and heartbeats change nothing); a deleted node
// wakes those that had it counted.
func (c *Controller) nodeHandler(logger klog.Logger) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			node, ok := obj.(*v1.Node)
			if !ok {
				return
			}
			c.nodes.put(node)
			c.forEachDaemonSet(func(ds *apps.DaemonSet, rules *daemon.Eligibility) {
				if rules.Check(node).Run {
					c.enqueueBatched(ds)
				}
			})
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			old, ok1 := oldObj.(*v1.Node)
			cur, ok2 := newObj.(*v1.Node)
			if !ok1 || !ok2 {
				return
			}
			relabelled := !apiequality.Semantic.DeepEqual(old.Labels, cur.Labels)
			oldTrouble, oldSince, _ := daemon.NodeTrouble(old)
			curTrouble, curSince, _ := daemon.NodeTrouble(cur)
			health := oldTrouble != curTrouble || !oldSince.Equal(curSince)
			// A node that starts shutting down, or recovers, changes what placement
			// does with the pods there (daemon: shutdown.go) for every DaemonSet.
			placement := health && (oldTrouble == daemon.ReasonNodeShuttingDown || curTrouble == daemon.ReasonNodeShuttingDown || curTrouble == "")
			if !relabelled && !health && apiequality.Semantic.DeepEqual(old.Spec.Taints, cur.Spec.Taints) {
				return
			}
			c.nodes.put(cur)
			c.forEachDaemonSet(func(ds *apps.DaemonSet, rules *daemon.Eligibility) {
				before, after := rules.Check(old), rules.Check(cur)
				if before.Run != after.Run || before.KeepRunning != after.KeepRunning ||
					(relabelled && daemon.PolicyReadsNodeLabels(ds.Annotations)) ||
					(health && daemon.PolicyReadsNodeHealth(ds.Annotations)) ||
					(placement && (before.KeepRunning || after.KeepRunning)) {
					logger.V(5).Info("Node change affects DaemonSet", "node", klog.KObj(cur), "daemonset", klog.KObj(ds), "reason", after.Reason)
					c.enqueueBatched(ds)
				}
			})
		},
		DeleteFunc: func(obj interface{}) {
			node, ok := unwrap[*v1.Node](obj)
			if !ok {
				if gone, tomb := obj.(cache.DeletedFinalStateUnknown); tomb {
					c.nodes.remove(gone.Key) // a node's key is its name
				}
				return
			}
			c.nodes.remove(node.Name)
			c.forEachDaemonSet(func(ds *apps.DaemonSet, rules *daemon.Eligibility) {
				v := rules.Check(node)
				rules.Forget(node.Name)
				if v.Run || v.KeepRunning {
					c.enqueueBatched(ds)
				}
			})
		},
	}
}

func (c *Controller) forEachDaemonSet(fn func(*apps.DaemonSet, *daemon.Eligibility)) {
	all, err := c.dsLister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, ds := range all {
		fn(ds, c.elig.get(cache.MetaObjectToName(ds).String(), ds))
	}
}
