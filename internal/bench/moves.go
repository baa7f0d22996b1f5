package bench

import (
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podLife is one pod as the benchmark's watch saw it: when it first appeared, and
// when it was first seen going (its deletion requested, or gone); zero: not yet.
type podLife struct {
	seen, gone time.Time
}

// podLives records the life of every DaemonSet pod, by node and DaemonSet.
type podLives struct {
	mu    sync.Mutex
	byKey map[nodeDaemonSet][]*podLife
	byUID map[types.UID]*podLife
}

func newPodLives() *podLives {
	return &podLives{byKey: map[nodeDaemonSet][]*podLife{}, byUID: map[types.UID]*podLife{}}
}

// see records pod as seen at now; gone says it was deleted. Pods no DaemonSet
// controls are ignored.
func (l *podLives) see(pod *v1.Pod, now time.Time, gone bool) {
	key, ok := daemonPodKey(pod)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	life := l.byUID[pod.UID]
	if life == nil {
		life = &podLife{seen: now}
		l.byUID[pod.UID] = life
		l.byKey[key] = append(l.byKey[key], life)
	}
	if (gone || pod.DeletionTimestamp != nil) && life.gone.IsZero() {
		life.gone = now
	}
}

// of returns the lives of the DaemonSet's pods on node.
func (l *podLives) of(node, daemonSet string) []podLife {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []podLife
	for _, life := range l.byKey[nodeDaemonSet{node, daemonSet}] {
		out = append(out, *life)
	}
	return out
}

// poolMove is a node moved from one pool to another at a time: when the API server
// answered the benchmark's update.
type poolMove struct {
	node, from, to string
	at             time.Time
}

// moveLatencies measures every move: from the node's update to its pods answering it
// (see moveAnswered), within the time until the node's next move. Moves never
// answered count as such. daemonSetsOf names the DaemonSets a pool's nodes run.
func moveLatencies(moves []poolMove, daemonSetsOf func(pool string) []string, lives func(node, daemonSet string) []podLife) latencies {
	byNode := map[string][]poolMove{}
	for _, m := range moves {
		byNode[m.node] = append(byNode[m.node], m)
	}
	var out latencies
	for _, ms := range byNode {
		sort.Slice(ms, func(i, j int) bool { return ms[i].at.Before(ms[j].at) })
		for i, m := range ms {
			var until time.Time
			if i+1 < len(ms) {
				until = ms[i+1].at
			}
			var gained, lost [][]podLife
			for _, ds := range daemonSetsOf(m.to) {
				gained = append(gained, lives(m.node, ds))
			}
			for _, ds := range daemonSetsOf(m.from) {
				lost = append(lost, lives(m.node, ds))
			}
			t, ok := moveAnswered(m.at, until, gained, lost)
			out.add(m.at, t, ok)
		}
	}
	return out
}

// moveAnswered is when a node's pods answered its move at at: the last of these, each
// DaemonSet of the new pool (gained, one list of pod lives per DaemonSet) with a pod
// there from at on, and every pod of the old pool's DaemonSets (lost) present from at
// on seen going. false when one of them had not happened by until (zero: no bound),
// the node's next move.
func moveAnswered(at, until time.Time, gained, lost [][]podLife) (time.Time, bool) {
	answer := at
	for _, lives := range gained {
		first, ok := time.Time{}, false
		for _, l := range lives {
			if !l.gone.IsZero() && l.gone.Before(at) {
				continue // gone before the move
			}
			t := l.seen
			if t.Before(at) {
				t = at // there already
			}
			if !ok || t.Before(first) {
				first, ok = t, true
			}
		}
		if !ok {
			return time.Time{}, false
		}
		answer = later(answer, first)
	}
	for _, lives := range lost {
		for _, l := range lives {
			if (!l.gone.IsZero() && l.gone.Before(at)) || (!until.IsZero() && !l.seen.Before(until)) {
				continue // gone before the move, or made after the next one
			}
			if l.gone.IsZero() {
				return time.Time{}, false
			}
			answer = later(answer, l.gone)
		}
	}
	if !until.IsZero() && answer.After(until) {
		return time.Time{}, false
	}
	return answer, true
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
