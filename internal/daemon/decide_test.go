package daemon

import (
	"reflect"
	"slices"
	"testing"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDecideSelectingAll(t *testing.T) {
	ds := newDS("ds", func(ds *apps.DaemonSet) { ds.Spec.Selector = &metav1.LabelSelector{} })
	p := Decide(snap(ds, nodes("n1"), newPod(ds, "p", "n2", orphan())))
	want := Plan{Events: []Event{{Type: v1.EventTypeWarning, Reason: EventSelectingAll,
		Message: "This daemon set is selecting all pods. A non-empty selector is required."}}}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("plan = %+v, want only the SelectingAll event", p)
	}
}

func TestDecideDaemonSetBeingDeleted(t *testing.T) {
	ds := newDS("ds")
	ds.DeletionTimestamp = &metav1.Time{Time: t0}
	p := Decide(snap(ds, nodes("n1", "n2"), newPod(ds, "p", "n1", orphan()), newPod(ds, "q", "n9", unbound())))
	if !reflect.DeepEqual(p, Plan{}) {
		t.Errorf("plan = %+v, want nothing", p)
	}
}

func TestDecideInvalidSelector(t *testing.T) {
	ds := newDS("ds", func(ds *apps.DaemonSet) {
		ds.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}
	})
	p := Decide(snap(ds, nodes("n1")))
	if got := eventReasons(p); !slices.Equal(got, []string{EventInvalidSpec}) || len(p.Creates) != 0 || p.Status != nil {
		t.Errorf("plan = %+v, want only an InvalidSpec event", p)
	}
}

func TestDecideCaps(t *testing.T) {
	ds := newDS("ds", withNodeSelector("role", "agent"))
	agent := func(name string) *v1.Node { return newNode(name, withLabels("role", "agent")) }
	s := snap(ds, []*v1.Node{agent("e5"), agent("e3"), agent("e1"), agent("e4"), agent("e2"), newNode("x1"), newNode("x2"), agent("f1"), agent("f2")},
		newPod(ds, "x2-pod", "x2"), newPod(ds, "x1-pod", "x1"),
		newPod(ds, "f1-pod", "f1", failed()), newPod(ds, "f2-pod", "f2", failed()))

	uncapped := Decide(s)
	if got := createdOn(uncapped); !slices.Equal(got, []string{"e1", "e2", "e3", "e4", "e5"}) {
		t.Fatalf("creates %v, want all five in name order", got)
	}
	if got := deletedNames(uncapped); !slices.Equal(got, []string{"f1-pod", "f2-pod", "x1-pod", "x2-pod"}) {
		t.Fatalf("deletes %v, want all four in name order", got)
	}

	s.MaxCreates, s.MaxDeletes = 2, 1
	p := Decide(s)
	if got := createdOn(p); !slices.Equal(got, []string{"e1", "e2"}) {
		t.Errorf("capped creates %v, want [e1 e2]", got)
	}
	if got := deletedNames(p); !slices.Equal(got, []string{"f1-pod"}) {
		t.Errorf("capped deletes %v, want [f1-pod]", got)
	}
	if !slices.Equal(p.FailedPodNodes, []string{"f1"}) {
		t.Errorf("FailedPodNodes = %v, want only f1: f2's failed pod is not deleted in this plan", p.FailedPodNodes)
	}
	if p.Template == nil || p.Template.Labels[HashLabel] != p.Hash || p.Hash == "" {
		t.Errorf("creates need the template of the current revision: %v %q", p.Template, p.Hash)
	}
}

func TestDecideNoTemplateWithoutCreates(t *testing.T) {
	ds := newDS("ds")
	if p := Decide(snap(ds, nodes("n1"), newPod(ds, "p", "n1"))); p.Template != nil || len(p.Creates) != 0 {
		t.Errorf("plan = %+v, want no creates and no template", p)
	}
}

func TestDecideUsesGivenEligibility(t *testing.T) {
	ds := newDS("ds")
	s := snap(ds, nodes("n1", "n2"))
	s.Eligibility = NewEligibility(&v1.PodSpec{NodeName: "n2"})
	if got := createdOn(Decide(s)); !slices.Equal(got, []string{"n2"}) {
		t.Errorf("creates %v, want [n2] from the cached eligibility", got)
	}
}

func TestDecideRevisions(t *testing.T) {
	ds := newDS("ds", withImage("img:v2"))
	cur := mustPatch(t, ds)
	v1Patch := mustPatch(t, newDS("ds", withImage("img:v1")))
	v0Patch := mustPatch(t, newDS("ds", withImage("img:v0")))

	t.Run("first sync records the template", func(t *testing.T) {
		p := Decide(snap(ds, nodes("n1")))
		if p.CreateRevision == nil || p.CreateRevision.Name != "ds-"+hashOf(ds) || p.Hash != hashOf(ds) {
			t.Fatalf("CreateRevision = %+v, hash %q", p.CreateRevision, p.Hash)
		}
		if p.Template.Labels[HashLabel] != p.Hash {
			t.Errorf("new pods labelled %q, want %q", p.Template.Labels[HashLabel], p.Hash)
		}
	})

	t.Run("name collision: collisionCount raised, nothing else", func(t *testing.T) {
		s := snap(ds, nodes("n1"))
		s.Revisions = []*apps.ControllerRevision{revision(newDS("someone-else"), "ds-"+hashOf(ds), "x", 1, v0Patch)}
		p := Decide(s)
		if p.Status == nil || p.Status.CollisionCount == nil || *p.Status.CollisionCount != 1 {
			t.Fatalf("status = %+v, want collisionCount 1", p.Status)
		}
		if len(p.Creates) != 0 || p.CreateRevision != nil {
			t.Errorf("plan acts on a collision: %+v", p)
		}
		next := ds.DeepCopy()
		next.Status.CollisionCount = p.Status.CollisionCount
		p = Decide(&Snapshot{DaemonSet: next, Nodes: s.Nodes, Revisions: s.Revisions, Now: t0})
		if p.CreateRevision == nil || p.CreateRevision.Name == "ds-"+hashOf(ds) || p.CreateRevision.Name != "ds-"+hashOf(next) {
			t.Errorf("after the collision: CreateRevision = %+v, want a salted name", p.CreateRevision)
		}
	})

	t.Run("older current revision renumbered, unlabelled one labelled, excess pruned", func(t *testing.T) {
		ds := ds.DeepCopy()
		limit := int32(1)
		ds.Spec.RevisionHistoryLimit = &limit
		unlabelled := revision(ds, "ds-legacy", "", 1, v0Patch)
		s := snap(ds, nodes("n1"), newPod(ds, "p", "n1", withHash("c")))
		s.Revisions = []*apps.ControllerRevision{unlabelled, revision(ds, "ds-c", "c", 2, cur), revision(ds, "ds-b", "b", 3, v1Patch)}
		p := Decide(s)
		if p.RenumberRevision == nil || p.RenumberRevision.Name != "ds-c" || p.RenumberRevision.Revision != 4 || p.Hash != "c" {
			t.Errorf("RenumberRevision = %+v, hash %q; want ds-c as revision 4", p.RenumberRevision, p.Hash)
		}
		if len(p.LabelRevisions) != 1 || p.LabelRevisions[0].Labels[HashLabel] != "ds-legacy" {
			t.Errorf("LabelRevisions = %v", p.LabelRevisions)
		}
		if len(p.PruneRevisions) != 1 || p.PruneRevisions[0].Name != "ds-legacy" {
			t.Errorf("PruneRevisions = %v, want the oldest", p.PruneRevisions)
		}
		if len(p.Creates)+len(p.Deletes) != 0 {
			t.Errorf("pod of the current revision replaced: %v %v", createdOn(p), deletedNames(p))
		}
	})

	t.Run("duplicates: pods relabelled and counted as updated", func(t *testing.T) {
		s := snap(ds, nodes("n1", "n2"), newPod(ds, "p1", "n1", withHash("dup")), newPod(ds, "p2", "n2", withHash("keep")))
		s.Revisions = []*apps.ControllerRevision{revision(ds, "ds-dup", "dup", 1, cur), revision(ds, "ds-keep", "keep", 2, cur)}
		p := Decide(s)
		if p.Hash != "keep" || len(p.DedupRevisions) != 1 || p.DedupRevisions[0].Name != "ds-dup" {
			t.Fatalf("hash %q, dedup %v", p.Hash, p.DedupRevisions)
		}
		if len(p.Relabel) != 1 || p.Relabel[0].Name != "p1" {
			t.Errorf("Relabel = %v, want p1", p.Relabel)
		}
		if len(p.Deletes) != 0 || p.Status == nil || p.Status.UpdatedNumberScheduled != 2 {
			t.Errorf("pods of a duplicate revision must count as updated: deletes %v, status %+v", deletedNames(p), p.Status)
		}
	})
}

func TestDecideIsPureAndDeterministic(t *testing.T) {
	ds := newDS("ds", withBudget("", "2"))
	s := rolloutCluster(ds)
	s.Pods = append(s.Pods, newPod(ds, "dup", "n2", old()), newPod(ds, "orphan", "n7", orphan(), unbound()))
	s.Revisions = []*apps.ControllerRevision{revision(ds, "ds-old", "old", 1, []byte(`{}`))}
	before := deepCopySnapshot(s)
	first := Decide(s)
	if !reflect.DeepEqual(before, deepCopySnapshot(s)) {
		t.Fatal("Decide modified its snapshot")
	}
	for i := 0; i < 10; i++ {
		if again := Decide(s); !reflect.DeepEqual(first, again) {
			t.Fatalf("plans differ:\n%+v\n%+v", first, again)
		}
	}
}

// deepCopySnapshot copies every object of s, so changes to them can be detected.
func deepCopySnapshot(s *Snapshot) *Snapshot {
	c := *s
	c.DaemonSet = s.DaemonSet.DeepCopy()
	c.Nodes = make([]*v1.Node, len(s.Nodes))
	for i, n := range s.Nodes {
		c.Nodes[i] = n.DeepCopy()
	}
	c.Pods = make([]*v1.Pod, len(s.Pods))
	for i, p := range s.Pods {
		c.Pods[i] = p.DeepCopy()
	}
	c.Revisions = make([]*apps.ControllerRevision, len(s.Revisions))
	for i, r := range s.Revisions {
		c.Revisions[i] = r.DeepCopy()
	}
	return &c
}
