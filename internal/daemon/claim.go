package daemon

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// claim is the ownership verdict for one object.
type claim int

const (
	claimIgnore  claim = iota // not ours and not to be ours
	claimOwned                // ours, and it matches
	claimAdopt                // an orphan that matches: to be adopted
	claimRelease              // ours, but it no longer matches: to be released
)

// decideClaim applies the ControllerRef rules to one object for the controller with
// the given UID and selector:
//   - controlled by another controller: ignored;
//   - controlled by us and matching: ours;
//   - controlled by us and not matching: released, even while it is being deleted;
//   - an orphan that matches and is not being deleted: adopted;
//   - any other orphan: ignored.
//
// The controller itself being deleted is not considered here: Decide claims nothing
// for a DaemonSet that is being deleted.
func decideClaim(obj metav1.Object, owner types.UID, selector labels.Selector) claim {
	matches := selector.Matches(labels.Set(obj.GetLabels()))
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		switch {
		case ref.UID != owner:
			return claimIgnore
		case matches:
			return claimOwned
		default:
			return claimRelease
		}
	}
	if !matches || obj.GetDeletionTimestamp() != nil {
		return claimIgnore
	}
	return claimAdopt
}
