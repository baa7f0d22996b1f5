package controller

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/everynode/everynode/internal/daemon"
	"github.com/everynode/everynode/internal/fakeapi"
)

// invariants watches every pod write in the fake API, in order, and records a
// violation whenever the cluster is in a state the controller must never produce:
//   - a DaemonSet has more pods on one node than its limit (1; 2 while surging), or
//     more nodes with two pods than allowed;
//   - a DaemonSet's pod is created for a node that does not exist or is not eligible
//     (unless the test changed that node within touchGrace: the controller may
//     rightly have acted on the node as it was);
//   - when an unavailability limit is set, more of the listed nodes than allowed lack
//     a Ready pod of the DaemonSet.
type invariants struct {
	api  *fakeapi.API
	w    watch.Interface
	done chan struct{}

	mu         sync.Mutex
	pods       map[types.UID]*v1.Pod
	limits     map[types.UID]*podLimits
	touched    map[string]time.Time
	peak       map[types.UID]int // most nodes seen at once with two pods, by DaemonSet
	peakDown   map[types.UID]int // most limited nodes seen at once without a Ready pod
	violations []string
	reported   map[string]bool
}

// podLimits are one DaemonSet's limits.
type podLimits struct {
	perNode     int      // pods one node may have
	doubled     int      // nodes that may have more than one pod
	unavailable int      // nodes of `nodes` that may lack a Ready pod; <0: unchecked
	nodes       []string // the nodes the unavailability limit applies to
}

const (
	touchGrace    = 2 * time.Second
	maxViolations = 20
)

func watchInvariants(ctx context.Context, client kubernetes.Interface, api *fakeapi.API) (*invariants, error) {
	w, err := client.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	inv := &invariants{
		api: api, w: w, done: make(chan struct{}),
		pods:     map[types.UID]*v1.Pod{},
		limits:   map[types.UID]*podLimits{},
		touched:  map[string]time.Time{},
		peak:     map[types.UID]int{},
		peakDown: map[types.UID]int{},
		reported: map[string]bool{},
	}
	go func() {
		defer close(inv.done)
		for ev := range w.ResultChan() {
			if pod, ok := ev.Object.(*v1.Pod); ok {
				inv.observe(ev.Type, pod)
			}
		}
	}()
	return inv, nil
}

func (inv *invariants) stop() {
	inv.w.Stop()
	<-inv.done
}

// setLimits replaces the limits of the DaemonSet with the given UID.
func (inv *invariants) setLimits(uid types.UID, l podLimits) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.limits[uid] = &l
}

// touch records that the test changed node now.
func (inv *invariants) touch(node string) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.touched[node] = time.Now()
}

func (inv *invariants) violated() []string {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return append([]string(nil), inv.violations...)
}

// peakDoubled is the most nodes that had two pods of the DaemonSet at once.
func (inv *invariants) peakDoubled(uid types.UID) int {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.peak[uid]
}

// peakUnavailable is the most nodes under the DaemonSet's unavailability limit seen at
// once without a Ready pod since the limit was set.
func (inv *invariants) peakUnavailable(uid types.UID) int {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.peakDown[uid]
}

// violate records a violation once, however many events see it.
func (inv *invariants) violate(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !inv.reported[msg] && len(inv.violations) < maxViolations {
		inv.reported[msg] = true
		inv.violations = append(inv.violations, msg)
	}
}

func (inv *invariants) observe(typ watch.EventType, pod *v1.Pod) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	switch typ {
	case watch.Added:
		inv.pods[pod.UID] = pod
		inv.checkCreated(pod)
	case watch.Modified:
		inv.pods[pod.UID] = pod
	case watch.Deleted:
		delete(inv.pods, pod.UID)
	}
	inv.checkCounts()
}

func daemonSetRef(pod *v1.Pod) *metav1.OwnerReference {
	if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == "DaemonSet" {
		return ref
	}
	return nil
}

func (inv *invariants) checkCreated(pod *v1.Pod) {
	ref := daemonSetRef(pod)
	if ref == nil {
		return
	}
	name, ok := daemon.TargetNode(pod)
	if !ok {
		inv.violate("pod %s was created pinned to no single node", pod.Name)
		return
	}
	if at, ok := inv.touched[name]; ok && time.Since(at) < touchGrace {
		return
	}
	obj, err := inv.api.Tracker.Get(daemonSetsResource, pod.Namespace, ref.Name)
	if err != nil {
		return
	}
	ds := obj.(*apps.DaemonSet)
	if ds.UID != ref.UID {
		return
	}
	obj, err = inv.api.Tracker.Get(nodesResource, "", name)
	if err != nil {
		inv.violate("pod %s was created for node %s, which does not exist", pod.Name, name)
		return
	}
	if v := daemon.NewEligibility(&ds.Spec.Template.Spec).Check(obj.(*v1.Node)); !v.Run {
		inv.violate("pod %s was created for node %s, which is not eligible: %s", pod.Name, name, v.Message())
	}
}

func (inv *invariants) checkCounts() {
	type key struct {
		ds   types.UID
		node string
	}
	count := map[key][]string{}
	ready := map[key]bool{}
	for _, pod := range inv.pods {
		ref := daemonSetRef(pod)
		if ref == nil {
			continue
		}
		node, ok := daemon.TargetNode(pod)
		if !ok {
			continue
		}
		k := key{ref.UID, node}
		count[k] = append(count[k], pod.Name)
		if pod.Status.Phase == v1.PodRunning && daemon.IsReady(pod) {
			ready[k] = true
		}
	}
	doubled := map[types.UID][]string{}
	for k, names := range count {
		l := inv.limitsFor(k.ds)
		if len(names) > l.perNode {
			sort.Strings(names)
			inv.violate("node %s has %d pods of one DaemonSet (limit %d): %s", k.node, len(names), l.perNode, strings.Join(names, ", "))
		}
		if len(names) > 1 {
			doubled[k.ds] = append(doubled[k.ds], k.node)
		}
	}
	for uid, nodes := range doubled {
		inv.peak[uid] = max(inv.peak[uid], len(nodes))
		if l := inv.limitsFor(uid); len(nodes) > l.doubled {
			slices.Sort(nodes)
			inv.violate("%d nodes have two pods of one DaemonSet (limit %d): %v", len(nodes), l.doubled, nodes)
		}
	}
	for uid, l := range inv.limits {
		if l.unavailable < 0 {
			continue
		}
		var missing []string
		for _, node := range l.nodes {
			if !ready[key{uid, node}] {
				missing = append(missing, node)
			}
		}
		inv.peakDown[uid] = max(inv.peakDown[uid], len(missing))
		if len(missing) > l.unavailable {
			inv.violate("%d nodes lack a Ready pod (limit %d): %v", len(missing), l.unavailable, missing)
		}
	}
}

func (inv *invariants) limitsFor(uid types.UID) *podLimits {
	if l, ok := inv.limits[uid]; ok {
		return l
	}
	return &podLimits{perNode: 1, unavailable: -1}
}
