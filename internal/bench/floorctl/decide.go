package floorctl

import (
	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/everynode/everynode/internal/daemon"
)

// daemonSet is a DaemonSet as the floor uses it: the object, its placement rules and
// the template of its new pods, parsed once per generation.
type daemonSet struct {
	ds       *apps.DaemonSet
	rules    *daemon.Eligibility
	template *v1.PodTemplateSpec
}

func newDaemonSet(ds *apps.DaemonSet) *daemonSet {
	return &daemonSet{ds: ds, rules: daemon.NewEligibility(&ds.Spec.Template.Spec), template: daemon.PodTemplate(ds, "")}
}

// inFlight are a node's writes that the pod cache does not show yet: pods created
// (their UID → the UID of their DaemonSet) and pods deleted (their UIDs).
type inFlight struct {
	created map[types.UID]types.UID
	deleted map[types.UID]bool
}

// decision is what one node needs: a pod of each DaemonSet in create, and the pods
// in remove gone.
type decision struct {
	create []*daemonSet
	remove []*v1.Pod
}

// decide is the floor's whole rule for one node. A DaemonSet whose rules let a new
// pod run on the node and that has none there gets one; one whose rules do not let
// its pod stay loses its pods there; one with more than one keeps the oldest. A pod
// counts for the DaemonSet that controls it (by UID) unless it is being deleted, has
// finished (then it is deleted, and replaced when the node still qualifies) or is in
// flight's deleted; in flight's created count as pods not yet in the cache.
func decide(node *v1.Node, sets []*daemonSet, pods []*v1.Pod, flight inFlight) decision {
	var d decision
	live := map[types.UID][]*v1.Pod{}
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || flight.deleted[pod.UID] {
			continue
		}
		ref := controllerUID(pod)
		if ref == "" {
			continue
		}
		if pod.Status.Phase == v1.PodFailed || pod.Status.Phase == v1.PodSucceeded {
			d.remove = append(d.remove, pod)
			continue
		}
		live[ref] = append(live[ref], pod)
	}
	pendingCreates := map[types.UID]int{}
	for pod, ds := range flight.created {
		if !cached(pods, pod) {
			pendingCreates[ds]++
		}
	}
	for _, s := range sets {
		if s.ds.DeletionTimestamp != nil {
			continue
		}
		verdict := s.rules.Check(node)
		mine := live[s.ds.UID]
		switch {
		case !verdict.KeepRunning:
			d.remove = append(d.remove, mine...)
		case len(mine)+pendingCreates[s.ds.UID] == 0:
			if verdict.Run {
				d.create = append(d.create, s)
			}
		case len(mine) > 1:
			d.remove = append(d.remove, allButOldest(mine)...)
		}
	}
	return d
}

func controllerUID(pod *v1.Pod) types.UID {
	for i := range pod.OwnerReferences {
		ref := &pod.OwnerReferences[i]
		if ref.Controller != nil && *ref.Controller && ref.Kind == "DaemonSet" {
			return ref.UID
		}
	}
	return ""
}

func cached(pods []*v1.Pod, uid types.UID) bool {
	for _, pod := range pods {
		if pod.UID == uid {
			return true
		}
	}
	return false
}

// allButOldest returns the pods but the one created first (by name when two were
// created in the same second).
func allButOldest(pods []*v1.Pod) []*v1.Pod {
	oldest := 0
	for i, pod := range pods {
		o := pods[oldest]
		if pod.CreationTimestamp.Before(&o.CreationTimestamp) ||
			(pod.CreationTimestamp.Equal(&o.CreationTimestamp) && pod.Name < o.Name) {
			oldest = i
		}
	}
	out := make([]*v1.Pod, 0, len(pods)-1)
	for i, pod := range pods {
		if i != oldest {
			out = append(out, pod)
		}
	}
	return out
}
