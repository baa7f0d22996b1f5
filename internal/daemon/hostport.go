package daemon

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// A surge pod that needs a host port its node's old pod holds can never be
// scheduled: the scheduler's NodePorts filter rejects the node for as long as the
// old pod runs, and a surge update deletes the old pod only once the new one is
// available. everynode says so, and with surge-fallback: delete-first replaces
// those nodes old pod first, one node at a time.

// noFreePorts is what the scheduler's NodePorts filter says of a node it rejects.
const noFreePorts = "didn't have free ports for the requested pod ports"

// portBlock is a node whose surge pod waits for host ports its old pod holds.
type portBlock struct {
	node  string
	ports []string // "8080/TCP"
}

// hostPortsBlocked returns the host ports surge pod cur asks for that old holds
// too, when the scheduler has left cur unschedulable for want of free ports; nil
// otherwise.
func hostPortsBlocked(cur, old *v1.Pod) []string {
	if cur.Spec.NodeName != "" || !unschedulableForPorts(cur) {
		return nil
	}
	held := map[string]bool{}
	for _, p := range hostPorts(&old.Spec) {
		held[p] = true
	}
	var both []string
	for _, p := range hostPorts(&cur.Spec) {
		if held[p] {
			both = append(both, p)
		}
	}
	return both
}

func unschedulableForPorts(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodScheduled {
			return c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable && strings.Contains(c.Message, noFreePorts)
		}
	}
	return false
}

// HasHostPorts reports whether pods of spec ask for a host port, in any container,
// init containers included.
func HasHostPorts(spec *v1.PodSpec) bool { return len(hostPorts(spec)) > 0 }

// hostPorts lists the host ports a pod's containers ask for, as "port/protocol".
func hostPorts(spec *v1.PodSpec) []string {
	var out []string
	for _, list := range [][]v1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range list {
			for _, p := range c.Ports {
				if p.HostPort == 0 {
					continue
				}
				proto := p.Protocol
				if proto == "" {
					proto = v1.ProtocolTCP
				}
				out = append(out, fmt.Sprintf("%d/%s", p.HostPort, proto))
			}
		}
	}
	return out
}

// deleteFirst, under surge-fallback: delete-first, deletes the old pod of the first
// blocked node (by name) while no other node is being replaced that way or waits
// for a new pod with its old one gone (replacing), so one node at a time goes
// without a pod. A held rollout deletes nothing.
func (u *updater) deleteFirst(blocked []*unode, replacing int, g *gate, p *Plan) {
	if !g.deleteFirst || g.hold != "" || replacing > 0 || len(blocked) == 0 {
		return
	}
	n := byName(blocked)[0]
	_, old, _ := u.podsOnNode(n)
	p.Deletes = append(p.Deletes, PodDelete{Pod: old.pod, Reason: ReasonSurgeDeleteFirst})
	n.wait = ReasonNewPodUnavailable
}

// hostPortMessage says which nodes' surge pods the host ports block, and what to do.
func hostPortMessage(blocks []portBlock, rev int64, fallback bool) string {
	var nodes, ports []string
	for _, b := range blocks {
		nodes = append(nodes, b.node)
		for _, p := range b.ports {
			if !slices.Contains(ports, p) {
				ports = append(ports, p)
			}
		}
	}
	slices.Sort(nodes)
	const shown = 5
	list := strings.Join(nodes[:min(shown, len(nodes))], ", ")
	if len(nodes) > shown {
		list += fmt.Sprintf(" and %d more", len(nodes)-shown)
	}
	what := fmt.Sprintf("the surge pods of revision %d on nodes %s cannot be scheduled: the old pods there hold host port %s", rev, list, strings.Join(ports, ", "))
	if fallback {
		return what + "; " + AnnotationSurgeFallback + ": " + SurgeDeleteFirst + " replaces them old pod first, one node at a time"
	}
	return what + "; set " + AnnotationSurgeFallback + ": " + SurgeDeleteFirst + " to replace those nodes old pod first, one at a time, or update with maxSurge 0 and maxUnavailable 1"
}
