package rolloutplan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

func copyInput(in Input) Input {
	out := Input{DaemonSet: in.DaemonSet.DeepCopy()}
	for _, n := range in.Nodes {
		out.Nodes = append(out.Nodes, n.DeepCopy())
	}
	for _, p := range in.Pods {
		out.Pods = append(out.Pods, p.DeepCopy())
	}
	for _, r := range in.Revisions {
		out.Revisions = append(out.Revisions, r.DeepCopy())
	}
	return out
}

// Plan changes nothing it is given, and gives the same schedule for the same input,
// whatever the policy: revisions marked, pods replaced, surged, adopted or given the
// stable revision.
func TestPlanLeavesInputAlone(t *testing.T) {
	zones := []string{"n01 zone=b", "n02 zone=a", "n03 zone=a", "n04 zone=b", "n05"}
	for _, d := range []*dsetup{
		setup(zones, budget("1", "0"), minReady(5), annotate("waves", "zone", "wave-pause", "30s", "max-restarts", "2")),
		setup(zones, annotate("partition", "2", "new-nodes", "stable")).bare("n05"),
		setup(zones, annotate("progress-deadline", "20s", "on-failure", "rollback")),
	} {
		in := d.input()
		orphan := readyPod(in.DaemonSet, "v1", "n05")
		orphan.Name, orphan.OwnerReferences = "orphan", nil // adopted
		failed := readyPod(in.DaemonSet, "v1", "n04")
		failed.Name, failed.Status.Phase = "failed", v1.PodFailed // replaced
		pending := readyPod(in.DaemonSet, "v1", "n03")
		pending.Name, pending.Status.Conditions = "pending", nil // started
		in.Pods = append(in.Pods, orphan, failed, pending)
		before := copyInput(in)
		first, err := Plan(in, Options{Start: t0, PodStart: 40 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(before, in); diff != "" {
			t.Fatalf("Plan changed its input (-before +after):\n%s", diff)
		}
		second, _ := Plan(in, Options{Start: t0, PodStart: 40 * time.Second})
		if diff := cmp.Diff(first, second); diff != "" {
			t.Fatalf("the same input planned twice differs (-first +second):\n%s", diff)
		}
		if len(first.Steps) == 0 {
			t.Fatalf("nothing planned: %+v", first.End)
		}
	}
}
