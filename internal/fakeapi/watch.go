package fakeapi

import (
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// copyAddedOnWatches makes every watch of cs hand out its Added objects as copies.
// client-go's tracker gives a new watch the objects it already holds (those stored
// between an informer's list and its watch) as they are stored, not copied, and an
// informer may change what it is handed (a transform trims it in place): without a
// copy that would change the tracker's object under a concurrent Get. The tracker
// copies every later event itself.
func copyAddedOnWatches(cs *fake.Clientset) {
	cs.WatchReactionChain = []clienttesting.WatchReactor{addedCopier{next: cs.WatchReactionChain}}
}

type addedCopier struct{ next []clienttesting.WatchReactor }

func (addedCopier) Handles(clienttesting.Action) bool { return true }

func (c addedCopier) React(action clienttesting.Action) (bool, watch.Interface, error) {
	for _, r := range c.next {
		if !r.Handles(action) {
			continue
		}
		handled, w, err := r.React(action)
		if !handled {
			continue
		}
		if err != nil || w == nil {
			return true, w, err
		}
		return true, watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
			if e.Type == watch.Added && e.Object != nil {
				e.Object = e.Object.DeepCopyObject()
			}
			return e, true
		}), nil
	}
	return false, nil, nil
}
