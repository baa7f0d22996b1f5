package e2e

import (
	"fmt"
	"sort"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// noRevisionTwiceOnANode: no node is given a pod of the revision its previous pod
// already had. In a rollout each node goes from one revision to the next, once; a
// second pod of the same revision on a node is either a pod created twice or a pod
// deleted that the plan did not mean to delete (and then replaced). It reads the
// pods' history from the watcher's states, so it holds only where no pod of the
// DaemonSet fails or is deleted by anyone but the controller, and where a rollback
// cannot catch a node between its old pod's deletion and its new pod's creation
// (one node updated at a time).
func noRevisionTwiceOnANode() invariant {
	h := &podHistory{seen: map[types.UID]bool{}, last: map[string]string{}}
	return invariant{
		name:    "nodes given a second pod of the revision they already ran (created twice, or deleted unplanned)",
		limit:   0,
		measure: h.measure,
	}
}

// podHistory remembers every pod the watcher has seen and the revision of the
// newest pod of each node.
type podHistory struct {
	seen    map[types.UID]bool
	last    map[string]string // node → revision hash of the newest pod created on it
	repeats []string
}

func (h *podHistory) measure(byNode map[string][]*v1.Pod) (int, []string) {
	for node, pods := range byNode {
		var fresh []*v1.Pod
		for _, p := range pods {
			if !h.seen[p.UID] {
				fresh = append(fresh, p)
			}
		}
		// A relist can bring several new pods at once: take them as created.
		sort.Slice(fresh, func(i, j int) bool {
			a, b := fresh[i].CreationTimestamp, fresh[j].CreationTimestamp
			if !a.Equal(&b) {
				return a.Before(&b)
			}
			return fresh[i].Name < fresh[j].Name
		})
		for _, p := range fresh {
			h.seen[p.UID] = true
			hash := p.Labels[apps.ControllerRevisionHashLabelKey]
			if prev, ok := h.last[node]; ok && prev == hash {
				h.repeats = append(h.repeats, fmt.Sprintf("%s: %s (revision %s again)", node, p.Name, hash))
			}
			h.last[node] = hash
		}
	}
	return len(h.repeats), h.repeats
}
