// Package gather is the one reading of the cluster that every tool shares: it builds
// the decision core's Snapshot of one DaemonSet, for the controller, `everynode
// explain`, `rollout status`, `rollout plan` and the dashboard alike, so that what
// they report cannot disagree with what the controller decides.
//
// The objects may come from the API server (List), from informer caches (Listers),
// or from anywhere the caller holds them (the controller's own caches, a simulated
// cluster); Snapshot is the only place a daemon.Snapshot is made from them.
package gather

import (
	"context"
	"fmt"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/everynode/everynode/internal/daemon"
)

// Objects are the cluster objects a decision about one DaemonSet reads.
type Objects struct {
	// Nodes are all the cluster's nodes.
	Nodes []*v1.Node
	// Pods are at least the pods the DaemonSet may hold: those it controls and the
	// orphans of its namespace (any others are ignored).
	Pods []*v1.Pod
	// Revisions are the ControllerRevisions of the DaemonSet's namespace.
	Revisions []*apps.ControllerRevision
}

// Controller is what only the controller knows of a DaemonSet; a tool that reads
// the cluster from outside leaves it zero.
type Controller struct {
	InFlight       daemon.InFlight
	InPlaceRefused map[types.UID]bool
	Backoff        map[string]time.Time
	Failures       map[string]int
	// MaxCreates and MaxDeletes cap the pod writes of one Plan; zero for none.
	MaxCreates, MaxDeletes int
	// Eligibility is the template's parsed placement rules, when the caller caches
	// them (nil: they are parsed for the decision).
	Eligibility *daemon.Eligibility
}

// Snapshot is what the core decides ds from, at now: the objects, what the
// controller knows, and the rollout annotations parsed once for the decision.
// Nothing given is copied or changed: the core never modifies its input.
func Snapshot(ds *apps.DaemonSet, objs Objects, now time.Time, ctl Controller) *daemon.Snapshot {
	pol := daemon.ParsePolicy(ds.Annotations)
	return &daemon.Snapshot{
		DaemonSet:      ds,
		Nodes:          objs.Nodes,
		Pods:           objs.Pods,
		Revisions:      objs.Revisions,
		Policy:         &pol,
		InFlight:       ctl.InFlight,
		InPlaceRefused: ctl.InPlaceRefused,
		Backoff:        ctl.Backoff,
		Failures:       ctl.Failures,
		Now:            now,
		MaxCreates:     ctl.MaxCreates,
		MaxDeletes:     ctl.MaxDeletes,
		Eligibility:    ctl.Eligibility,
	}
}

// List reads the objects a decision about ds reads from the API server: every node,
// the pods and the ControllerRevisions of its namespace.
func List(ctx context.Context, client kubernetes.Interface, ds *apps.DaemonSet) (Objects, error) {
	var objs Objects
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return objs, fmt.Errorf("listing nodes: %w", err)
	}
	pods, err := client.CoreV1().Pods(ds.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return objs, fmt.Errorf("listing pods: %w", err)
	}
	revs, err := client.AppsV1().ControllerRevisions(ds.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return objs, fmt.Errorf("listing controller revisions: %w", err)
	}
	for i := range nodes.Items {
		objs.Nodes = append(objs.Nodes, &nodes.Items[i])
	}
	for i := range pods.Items {
		objs.Pods = append(objs.Pods, &pods.Items[i])
	}
	for i := range revs.Items {
		objs.Revisions = append(objs.Revisions, &revs.Items[i])
	}
	return objs, nil
}

// Listers read the same objects from informer caches.
type Listers struct {
	Nodes     corelisters.NodeLister
	Pods      corelisters.PodLister
	Revisions appslisters.ControllerRevisionLister
}

// List reads the objects a decision about ds reads from the caches.
func (l Listers) List(ds *apps.DaemonSet) (Objects, error) {
	var objs Objects
	var err error
	if objs.Nodes, err = l.Nodes.List(labels.Everything()); err != nil {
		return objs, fmt.Errorf("listing nodes from cache: %w", err)
	}
	if objs.Pods, err = l.Pods.Pods(ds.Namespace).List(labels.Everything()); err != nil {
		return objs, fmt.Errorf("listing pods from cache: %w", err)
	}
	if objs.Revisions, err = l.Revisions.ControllerRevisions(ds.Namespace).List(labels.Everything()); err != nil {
		return objs, fmt.Errorf("listing controller revisions from cache: %w", err)
	}
	return objs, nil
}
