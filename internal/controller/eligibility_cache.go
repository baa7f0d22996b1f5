package controller

import (
	"sync"

	apps "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/everynode/everynode/internal/daemon"
)

// eligibilityCache keeps each DaemonSet's parsed placement rules for as long as its
// generation (and so its template) is unchanged, so that node events and syncs do not
// parse selectors and affinities again and again. The rules remember their verdict
// for each node object of the informer's cache, so a sync evaluates only the nodes
// that changed since the last one.
type eligibilityCache struct {
	mu    sync.RWMutex
	byUID map[types.UID]cachedEligibility
}

type cachedEligibility struct {
	generation int64
	rules      *daemon.Eligibility
}

func newEligibilityCache() *eligibilityCache {
	return &eligibilityCache{byUID: map[types.UID]cachedEligibility{}}
}

func (c *eligibilityCache) get(ds *apps.DaemonSet) *daemon.Eligibility {
	c.mu.RLock()
	e, ok := c.byUID[ds.UID]
	c.mu.RUnlock()
	if ok && e.generation == ds.Generation {
		return e.rules
	}
	rules := daemon.NewEligibility(&ds.Spec.Template.Spec).RememberingVerdicts()
	c.mu.Lock()
	c.byUID[ds.UID] = cachedEligibility{generation: ds.Generation, rules: rules}
	c.mu.Unlock()
	return rules
}

func (c *eligibilityCache) forget(uid types.UID) {
	c.mu.Lock()
	delete(c.byUID, uid)
	c.mu.Unlock()
}
