package controller

import (
	apps "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/everynode/everynode/internal/daemon"
)

// eligibilityCache keeps each DaemonSet's parsed placement rules for as long as its
// generation (and so its template) is unchanged, so that node events and syncs do not
// parse selectors and affinities again and again. The rules remember their verdict
// for each node object of the informer's cache, so a sync evaluates only the nodes
// that changed since the last one.
// The rules of a DaemonSet are its dsState's elig, kept for the object's UID and
// generation: a DaemonSet recreated under the same name starts afresh.
type eligibilityCache struct{ st *states }

type cachedEligibility struct {
	uid        types.UID
	generation int64
	rules      *daemon.Eligibility
}

func newEligibilityCache(st *states) *eligibilityCache { return &eligibilityCache{st: st} }

// get returns the rules of ds, key its key.
func (c *eligibilityCache) get(key string, ds *apps.DaemonSet) *daemon.Eligibility {
	c.st.mu.Lock()
	var kept cachedEligibility
	if s := c.st.peek(key); s != nil {
		kept = s.elig
	}
	c.st.mu.Unlock()
	if kept.rules != nil && kept.uid == ds.UID && kept.generation == ds.Generation {
		return kept.rules
	}
	rules := daemon.NewEligibility(&ds.Spec.Template.Spec).RememberingVerdicts()
	c.st.mu.Lock()
	c.st.at(key).elig = cachedEligibility{uid: ds.UID, generation: ds.Generation, rules: rules}
	c.st.mu.Unlock()
	return rules
}
