package daemon

import (
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Rollout policies played out on the simulated cluster of simulation_test.go: a
// rollout by waves never moves two waves at once and respects the pause between them;
// a paused or partitioned rollout never goes past its hold, and finishes once the hold
// is lifted.

// hasCurrent reports whether a live pod on node runs the template of hash.
func (c *simCluster) hasCurrent(node, hash string) bool {
	return slices.ContainsFunc(c.alive(node), func(p *v1.Pod) bool { return p.Labels[HashLabel] == hash })
}

// finished: the node runs one pod, of the template of hash, available.
func (c *simCluster) finished(node, hash string) bool {
	pods := c.alive(node)
	return len(pods) == 1 && pods[0].Labels[HashLabel] == hash && IsAvailable(pods[0], c.ds.Spec.MinReadySeconds, c.now)
}

// simWaves groups the selected nodes by zone: the zones of order first, then the
// others sorted, then the nodes without a zone; empty waves are left out.
func (c *simCluster) simWaves(order []string) [][]string {
	byZone := map[string][]string{}
	for _, n := range c.nodes {
		if c.eligible[n.Name] {
			byZone[n.Labels["zone"]] = append(byZone[n.Labels["zone"]], n.Name)
		}
	}
	var zones []string
	for z := range byZone {
		if z != "" && !slices.Contains(order, z) {
			zones = append(zones, z)
		}
	}
	slices.Sort(zones)
	var out [][]string
	for _, z := range append(append(slices.Clone(order), zones...), "") {
		if len(byZone[z]) > 0 {
			out = append(out, byZone[z])
		}
	}
	return out
}

func TestWavesSimulation(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		c := newSimCluster(seed)
		ann := map[string]string{AnnotationWaves: "zone"}
		var order []string
		if c.r.IntN(2) == 0 {
			order = []string{"c", "a"}
			ann[AnnotationWaveOrder] = "c,a"
		}
		var pause time.Duration
		if c.r.IntN(2) == 0 {
			pause = time.Duration(5*(1+c.r.IntN(4))) * time.Second
			ann[AnnotationWavePause] = pause.String()
		}
		if c.r.IntN(2) == 0 {
			ann[AnnotationNewNodes] = NewNodesStable
		}
		c.ds.Annotations = ann
		for _, n := range c.nodes {
			if z := []string{"a", "b", "c", ""}[c.r.IntN(4)]; z != "" {
				n.Labels["zone"] = z
			}
		}
		waves := c.simWaves(order)
		desc := fmt.Sprintf("seed %d (%d waves, %+v, minReady %ds, caps %v, failures %v, %v)",
			seed, len(waves), c.budget, c.ds.Spec.MinReadySeconds, c.caps, c.failRate > 0, ann)

		cur := hashOf(c.ds)
		started := make([]bool, len(waves))
		oneWave := func(*Plan) error {
			current := len(waves) // the first wave not finished
			for i, w := range waves {
				if !slices.ContainsFunc(w, func(n string) bool { return !c.finished(n, cur) }) {
					continue
				}
				current = i
				break
			}
			for i, w := range waves {
				touched := slices.ContainsFunc(w, func(n string) bool { return c.hasCurrent(n, cur) || len(c.alive(n)) == 0 })
				if !touched {
					continue
				}
				if i > current {
					return fmt.Errorf("wave %d %v moves while wave %d %v is not finished", i, w, current, waves[current])
				}
				if started[i] {
					continue
				}
				started[i] = true
				var last time.Time // when the earlier waves were last finished
				for _, node := range slices.Concat(waves[:i]...) {
					if at := availableAt(readyCondition(c.alive(node)[0]), c.ds.Spec.MinReadySeconds); at.After(last) {
						last = at
					}
				}
				if i > 0 && c.now.Before(last.Add(pause)) {
					return fmt.Errorf("wave %d starts at %v, before the pause after %v ends", i, c.now, last)
				}
			}
			return nil
		}
		hash := c.run(t, desc, c.converged, oneWave)
		p := c.settle(t, desc, hash)
		if cond := storedCondition(c.ds, p); cond == nil || Reason(cond.Reason) != ReasonNewRevisionAvailable {
			t.Fatalf("%s: finished with Progressing %+v", desc, cond)
		}
	}
}

func TestHeldRolloutSimulation(t *testing.T) {
	for seed := uint64(1); seed <= 100; seed++ {
		c := newSimCluster(seed)
		desired := len(c.eligible)
		paused := false
		var ann, lift map[string]string
		keep := func() int { return len(c.eligible) } // nodes that must stay on the older revision
		switch c.r.IntN(3) {
		case 0:
			// A node joins while paused: with new-nodes stable it stays on the older
			// revision too.
			paused = true
			ann = map[string]string{AnnotationPaused: "true", AnnotationNewNodes: NewNodesStable}
			lift = map[string]string{AnnotationPaused: "false", AnnotationNewNodes: NewNodesStable}
		case 1:
			n := c.r.IntN(desired + 1)
			keep = func() int { return n }
			ann, lift = map[string]string{AnnotationPartition: fmt.Sprint(n)}, map[string]string{AnnotationPartition: "0"}
		default:
			pct := 1 + c.r.IntN(100)
			keep = func() int { return (pct*desired + 99) / 100 }
			ann, lift = map[string]string{AnnotationPartition: fmt.Sprintf("%d%%", pct)}, map[string]string{AnnotationPartition: "0%"}
		}
		c.ds.Annotations = ann
		cur := hashOf(c.ds)
		desc := fmt.Sprintf("seed %d (%d selected nodes, %+v, minReady %ds, caps %v, failures %v, %v)",
			seed, desired, c.budget, c.ds.Spec.MinReadySeconds, c.caps, c.failRate > 0, ann)

		withinHold := func(p *Plan) error {
			if paused && c.step == 0 {
				n := newNode("joined", withLabels("pool", "a"))
				c.nodes, c.eligible[n.Name], c.joining, c.dirty = append(c.nodes, n), true, map[string]bool{n.Name: true}, true
				c.budget, _ = rollingBudget(c.ds, len(c.eligible))
			}
			if paused && p != nil {
				for _, d := range p.Deletes {
					if d.Reason == ReasonUpdate {
						return fmt.Errorf("paused, yet %s is deleted for the update", d.Pod.Name)
					}
				}
				for _, cr := range p.Creates {
					if cr.Reason == ReasonSurge {
						return fmt.Errorf("paused, yet a surge pod is created on %s", cr.Node)
					}
				}
			}
			moved := 0
			for node := range c.eligible {
				if c.hasCurrent(node, cur) {
					moved++
				}
			}
			if moved > len(c.eligible)-keep() {
				return fmt.Errorf("%d nodes run the new revision, the hold allows %d", moved, len(c.eligible)-keep())
			}
			return nil
		}
		held := func(string) bool {
			if len(c.hidden)+len(c.unseen) > 0 {
				return false
			}
			moved := 0
			for node := range c.eligible {
				pods := c.alive(node)
				if len(pods) != 1 || !IsAvailable(pods[0], c.ds.Spec.MinReadySeconds, c.now) {
					return false
				}
				if c.hasCurrent(node, cur) {
					moved++
				}
			}
			return moved == len(c.eligible)-keep() && (!paused || c.step > 0)
		}
		c.run(t, desc+", held", held, withinHold)

		// Held: later syncs change nothing, and the condition says why.
		for range 10 {
			c.advance()
			s := c.snapshot()
			p := Decide(s)
			if err := checkPlan(s, p); err != nil {
				t.Fatalf("%s, held: %v", desc, err)
			}
			c.apply(p)
			if len(p.Creates)+len(p.Deletes) > 0 {
				t.Fatalf("%s, held: creates on %v, deletes %v", desc, createdOn(p), deletedNames(p))
			}
		}
		want := ReasonPartitionHeld
		switch {
		case paused:
			want = ReasonPaused
		case keep() == 0:
			want = ReasonNewRevisionAvailable
		}
		if cond := storedCondition(c.ds, Plan{}); cond == nil || Reason(cond.Reason) != want {
			t.Fatalf("%s, held: Progressing %+v, want %s", desc, cond, want)
		}

		// Lifted: the rollout finishes.
		c.ds = c.ds.DeepCopy()
		c.ds.Annotations, c.dirty = lift, true
		hash := c.run(t, desc+", lifted", c.converged, nil)
		p := c.settle(t, desc, hash)
		if cond := storedCondition(c.ds, p); cond == nil || Reason(cond.Reason) != ReasonNewRevisionAvailable {
			t.Fatalf("%s: finished with Progressing %+v", desc, cond)
		}
	}
}
