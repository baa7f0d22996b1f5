package daemon

import (
	"testing"

	apps "k8s.io/api/apps/v1"
)

// stableCluster is ds (already at its new template, with new-nodes: stable and the
// given extra annotations) on nodes n1..n3: n1 and n2 run pods of the old template
// recorded as revision 1; n3 has no pod.
func stableCluster(t *testing.T, annotations ...string) *Snapshot {
	t.Helper()
	oldDS := newDS("ds")
	ds := newDS("ds", withImage("img:v2"), func(ds *apps.DaemonSet) {
		ds.Annotations = kvMap(append([]string{AnnotationNewNodes, NewNodesStable}, annotations...))
	})
	s := snap(ds, nodes("n1", "n2", "n3"),
		newPod(ds, "old-n1", "n1", withHash(hashOf(oldDS))),
		newPod(ds, "old-n2", "n2", withHash(hashOf(oldDS))))
	s.Revisions = []*apps.ControllerRevision{revision(ds, "ds-old", hashOf(oldDS), 1, mustPatch(t, oldDS))}
	return s
}

// A node without a pod gets the stable revision only while the rollout holds it.
// Otherwise the rollout, which deletes the old pod of the node it updates, would see
// that node come back on the stable revision, and never finish.
func TestStableNewNodesOnlyWhileTheRolloutHoldsTheNode(t *testing.T) {
	oldHash := hashOf(newDS("ds"))
	tests := []struct {
		name        string
		annotations []string
		wantStable  bool
	}{
		{name: "rollout moving: the node gets the current revision"},
		{name: "paused: the node gets the stable revision", annotations: []string{AnnotationPaused, "true"}, wantStable: true},
		{name: "node outside the canary: stable", annotations: []string{AnnotationCanary, "canary=true"}, wantStable: true},
		{name: "partition kept by the others: current", annotations: []string{AnnotationPartition, "2"}},
		{name: "partition that needs the node: stable", annotations: []string{AnnotationPartition, "3"}, wantStable: true},
		{name: "partition in percent that needs the node: stable", annotations: []string{AnnotationPartition, "100%"}, wantStable: true},
		{name: "invalid annotation: stable", annotations: []string{AnnotationPartition, "abc"}, wantStable: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Decide(stableCluster(t, tt.annotations...))
			if len(p.Creates) != 1 || p.Creates[0].Node != "n3" {
				t.Fatalf("creates %v, want one on n3", createdOn(p))
			}
			got := p.Creates[0].Template
			switch {
			case tt.wantStable && (got == nil || got.Labels[HashLabel] != oldHash):
				t.Errorf("n3 gets template %v, want the stable revision %s", got, oldHash)
			case !tt.wantStable && got != nil:
				t.Errorf("n3 gets the stable revision %s, want the current template", got.Labels[HashLabel])
			}
		})
	}
}
