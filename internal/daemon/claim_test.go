package daemon

import (
	"testing"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

func TestDecideClaim(t *testing.T) {
	ds := newDS("ds")
	other := newDS("other")
	selector := labels.SelectorFromSet(labels.Set{"app": "ds"})
	nonMatching := func(p *v1.Pod) { p.Labels = map[string]string{"app": "elsewhere"} }
	ownerNotController := func(p *v1.Pod) {
		ref := *ControllerRef(ds)
		ref.Controller = nil
		p.OwnerReferences = []metav1.OwnerReference{ref}
	}
	tests := []struct {
		name string
		pod  *v1.Pod
		want claim
	}{
		{"controlled by another: ignored", newPod(other, "p", "n", func(p *v1.Pod) { p.Labels["app"] = "ds" }), claimIgnore},
		{"controlled by another, not matching: ignored", newPod(other, "p", "n"), claimIgnore},
		{"ours and matching: owned", newPod(ds, "p", "n"), claimOwned},
		{"ours and matching while being deleted: owned", newPod(ds, "p", "n", terminating()), claimOwned},
		{"ours, not matching: released", newPod(ds, "p", "n", nonMatching), claimRelease},
		{"ours, not matching, being deleted: released", newPod(ds, "p", "n", nonMatching, terminating()), claimRelease},
		{"orphan matching: adopted", newPod(ds, "p", "n", orphan()), claimAdopt},
		{"orphan matching, being deleted: ignored", newPod(ds, "p", "n", orphan(), terminating()), claimIgnore},
		{"orphan not matching: ignored", newPod(ds, "p", "n", orphan(), nonMatching), claimIgnore},
		{"owner reference that is not a controller: an orphan", newPod(ds, "p", "n", ownerNotController), claimAdopt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decideClaim(tt.pod, types.UID("uid-ds"), selector); got != tt.want {
				t.Errorf("decideClaim = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestDecideAdoptsAndReleases(t *testing.T) {
	ds := newDS("ds")
	relabelled := func(p *v1.Pod) { p.Labels["app"] = "moved" }
	ownedPod := newPod(ds, "owned", "n1")
	orphanPod := newPod(ds, "orphan", "n2", orphan())
	releasedPod := newPod(ds, "released", "n3", relabelled)
	foreignPod := newPod(newDS("x"), "foreign", "n3")

	patch := mustPatch(t, ds)
	orphanRev := revision(ds, "ds-orphan", "h0", 1, []byte("{}"))
	orphanRev.OwnerReferences = nil
	releasedRev := revision(ds, "ds-released", "h1", 2, []byte("{}"))
	releasedRev.Labels["app"] = "moved"
	curRev := revision(ds, "ds-cur", "cur", 3, patch)

	s := snap(ds, nodes("n1", "n2", "n3"), ownedPod, orphanPod, releasedPod, foreignPod)
	s.Revisions = []*apps.ControllerRevision{orphanRev, releasedRev, curRev}
	p := Decide(s)

	if len(p.Adopt) != 1 || p.Adopt[0] != orphanPod {
		t.Errorf("Adopt = %v, want the orphan", p.Adopt)
	}
	if len(p.Release) != 1 || p.Release[0] != releasedPod {
		t.Errorf("Release = %v, want the relabelled pod", p.Release)
	}
	if len(p.AdoptRevisions) != 1 || p.AdoptRevisions[0] != orphanRev {
		t.Errorf("AdoptRevisions = %v", p.AdoptRevisions)
	}
	if len(p.ReleaseRevisions) != 1 || p.ReleaseRevisions[0] != releasedRev {
		t.Errorf("ReleaseRevisions = %v", p.ReleaseRevisions)
	}
	// The adopted pod counts as the DaemonSet's; the released and foreign ones do
	// not, so n3 gets a pod of its own.
	if got := createdOn(p); !sameStrings(got, []string{"n3"}) {
		t.Errorf("creates on %v, want [n3]", got)
	}
	if p.CreateRevision != nil || p.Hash != "cur" {
		t.Errorf("current revision should be ds-cur: create %v, hash %q", p.CreateRevision, p.Hash)
	}
	// The adopted revision is ours: it is an old revision, not a name collision.
	if p.Status == nil || p.Status.CurrentNumberScheduled != 2 {
		t.Errorf("status = %+v, want 2 current (owned + adopted)", p.Status)
	}
}
