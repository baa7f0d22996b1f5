package daemon

import (
	"sync"

	v1 "k8s.io/api/core/v1"
)

// RememberingVerdicts returns rules that remember, per node name, the verdict for
// the node object they last checked, and answer again from it while they are asked
// about that same object. A controller checks every node against every DaemonSet on
// each sync; with informer caches, whose objects are replaced on every change and
// never modified, only the nodes that changed are evaluated again. Callers that
// modify node objects in place must use the rules NewEligibility returns instead.
func (e *Eligibility) RememberingVerdicts() *Eligibility {
	r := *e
	r.remembered = &verdicts{byName: map[string]*verdictFor{}}
	return &r
}

// Forget drops what the rules remember of a node, once it is deleted.
func (e *Eligibility) Forget(nodeName string) {
	if e.remembered == nil {
		return
	}
	e.remembered.mu.Lock()
	delete(e.remembered.byName, nodeName)
	e.remembered.mu.Unlock()
}

// verdicts is what RememberingVerdicts keeps: safe for concurrent use, as the rules are.
type verdicts struct {
	mu     sync.Mutex
	byName map[string]*verdictFor // pointers keep the map's entries small
}

type verdictFor struct {
	node    *v1.Node
	verdict Verdict
}

func (r *verdicts) check(node *v1.Node, evaluate func(*v1.Node) Verdict) Verdict {
	r.mu.Lock()
	got, ok := r.byName[node.Name]
	r.mu.Unlock()
	if ok && got.node == node {
		return got.verdict
	}
	v := evaluate(node)
	r.mu.Lock()
	r.byName[node.Name] = &verdictFor{node: node, verdict: v}
	r.mu.Unlock()
	return v
}
