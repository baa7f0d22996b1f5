package daemon

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
)

// FuzzNodeGate: any annotation value, any mix of tolerations, node selectors, taints
// and gating pods. The gate opens only when some gating DaemonSet should run on the
// node and every one that should has an available pod there; a problem always
// names the annotation; a closed gate says which DaemonSets it waits for; nothing
// given is changed.
func FuzzNodeGate(f *testing.F) {
	for _, seed := range []struct {
		value string
		shape uint64
	}{
		{gateKey, 1}, {gateKey, 0xdead}, {" " + gateKey, 7}, {"", 3}, {"a/b/c", 9}, {"UPPER.example.com/x", 0xbeef},
		{strings.Repeat("k", 64), 2}, {"example.com/", 5},
	} {
		f.Add(seed.value, seed.shape)
	}
	f.Fuzz(func(t *testing.T, value string, shape uint64) {
		r := rand.New(rand.NewPCG(shape, 0x9a7e))
		key := strings.TrimSpace(value)
		node := newNode("n1", withLabels("os", []string{"linux", "windows"}[r.IntN(2)]))
		if r.IntN(4) > 0 {
			withTaint(key, v1.TaintEffectNoSchedule)(node)
		}
		if r.IntN(3) == 0 {
			withTaint("dedicated", v1.TaintEffectNoSchedule)(node)
		}
		var members []GateMember
		for i := range r.IntN(4) {
			ds := randomGating(r, value, i)
			g := ParseNodeGate(ds)
			if again := ParseNodeGate(ds); g != again {
				t.Fatalf("%q: parsing is not deterministic", value)
			}
			if g.Problem != "" && !strings.Contains(g.Problem, AnnotationNodeGate) {
				t.Fatalf("%q: problem %q does not name the annotation", value, g.Problem)
			}
			if g.Key == "" && g.Problem == "" {
				t.Fatalf("%q: an annotated DaemonSet gates nothing and has no problem", value)
			}
			if g.Key == "" {
				continue // not a gate: the controller keys gates by their key
			}
			var pods []*v1.Pod
			for j := range r.IntN(3) {
				pods = append(pods, randomGatingPod(r, ds, j))
			}
			members = append(members, GateMember{DaemonSet: ds, Gate: g, Pods: pods})
		}
		if len(members) == 0 || len(GateTaints(node, key)) == 0 {
			return
		}
		before := node.DeepCopy()
		v := DecideGate(node, key, members, t0)
		if !reflect.DeepEqual(before, node) {
			t.Fatalf("DecideGate changed the node")
		}
		holders, ready := 0, 0
		for i, m := range v.Members {
			if m.ShouldRun {
				holders++
				if m.Available {
					ready++
				}
				if m.Available && members[i].Gate.Problem != "" {
					t.Fatalf("a DaemonSet that does not tolerate its gate counts as available: %+v", m)
				}
			}
		}
		if v.Open != (holders > 0 && ready == holders) {
			t.Fatalf("open %v with %d of %d gating DaemonSets available: %+v", v.Open, ready, holders, v)
		}
		if v.Message == "" || (v.Reason == ReasonGateWaiting) != (holders > 0 && ready < holders) {
			t.Fatalf("verdict %s %q for %d of %d available", v.Reason, v.Message, ready, holders)
		}
		if v.RecheckAfter < 0 || v.RecheckAfter > 61*time.Second {
			t.Fatalf("recheck after %v", v.RecheckAfter)
		}
	})
}

func randomGating(r *rand.Rand, value string, i int) *apps.DaemonSet {
	opts := []dsOpt{withAnnotations(AnnotationNodeGate, value), withMinReady(int32(r.IntN(3) * 30))}
	switch r.IntN(4) {
	case 0:
		opts = append(opts, withTolerations(v1.Toleration{Key: strings.TrimSpace(value), Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}))
	case 1:
		opts = append(opts, withTolerations(v1.Toleration{Operator: v1.TolerationOpExists}))
	case 2:
		opts = append(opts, withTolerations(v1.Toleration{Key: strings.TrimSpace(value), Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}))
	}
	if r.IntN(2) == 0 {
		opts = append(opts, withNodeSelector("os", "linux"))
	}
	return newDS("gating-"+string(rune('a'+i)), opts...)
}

func randomGatingPod(r *rand.Rand, ds *apps.DaemonSet, j int) *v1.Pod {
	opts := []podOpt{readySince(t0.Add(-time.Duration(r.IntN(90)) * time.Second))}
	switch r.IntN(6) {
	case 0:
		opts = append(opts, notReady())
	case 1:
		opts = append(opts, notReady(), waitingIn("ImagePullBackOff", false))
	case 2:
		opts = append(opts, terminating())
	case 3:
		opts = append(opts, withPhase(v1.PodFailed))
	}
	return newPod(ds, ds.Name+"-"+string(rune('0'+j)), "n1", opts...)
}
