package inspect

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/everynode/everynode/internal/daemon"
)

func TestPause(t *testing.T) {
	ds := newDS("agent", map[string]string{"keep": "me"})
	client := fake.NewClientset(ds)
	msg, err := Pause(context.Background(), client, ns, "agent")
	if err != nil || msg != "daemonset.apps/agent paused" {
		t.Fatalf("Pause = %q, %v", msg, err)
	}
	got := getDS(t, client, "agent").Annotations
	if got[daemon.AnnotationPaused] != "true" || got["keep"] != "me" {
		t.Errorf("annotations = %v", got)
	}
	if msg, _ := Pause(context.Background(), client, ns, "agent"); msg != "daemonset.apps/agent is already paused" {
		t.Errorf("second Pause = %q", msg)
	}
	if _, err := Pause(context.Background(), client, ns, "nope"); err == nil || !strings.Contains(err.Error(), `DaemonSet "nope" not found in namespace "prod"`) {
		t.Errorf("Pause of a missing DaemonSet: %v", err)
	}
}

func TestResume(t *testing.T) {
	ds := newDS("agent", map[string]string{daemon.AnnotationPaused: "true", daemon.AnnotationProgressDeadline: "5m"})
	rev1, _ := revision(t, ds, 1)
	ds.Spec.Template.Spec.Containers[0].Image = "img:v2"
	rev2, _ := revision(t, ds, 2)
	rev2.Annotations = map[string]string{daemon.MarkFailed: "2 ProgressDeadlineExceeded: no pod became available", daemon.MarkAvailable: "x"}
	// A revision of another DaemonSet keeps its mark.
	other := newDS("other", nil)
	otherRev, _ := revision(t, other, 1)
	otherRev.Annotations = map[string]string{daemon.MarkFailed: "1 PodRestartLimitExceeded: boom"}
	client := fake.NewClientset(ds, rev1, rev2, other, otherRev)

	msg, err := Resume(context.Background(), client, ns, "agent")
	if err != nil {
		t.Fatal(err)
	}
	if msg != "daemonset.apps/agent resumed (removed rollout.everynode.dev/paused, cleared the failure of revision 2)" {
		t.Errorf("Resume = %q", msg)
	}
	got := getDS(t, client, "agent").Annotations
	if _, ok := got[daemon.AnnotationPaused]; ok || got[daemon.AnnotationProgressDeadline] != "5m" {
		t.Errorf("DaemonSet annotations = %v", got)
	}
	revs, err := client.AppsV1().ControllerRevisions(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range revs.Items {
		_, failed := r.Annotations[daemon.MarkFailed]
		switch r.Name {
		case rev2.Name:
			if failed || r.Annotations[daemon.MarkAvailable] != "x" {
				t.Errorf("revision 2 annotations = %v", r.Annotations)
			}
		case otherRev.Name:
			if !failed {
				t.Errorf("the other DaemonSet's revision lost its mark")
			}
		}
	}
	if msg, err := Resume(context.Background(), client, ns, "agent"); err != nil || !strings.Contains(msg, "nothing to resume") {
		t.Errorf("second Resume = %q, %v", msg, err)
	}
}

func TestPromote(t *testing.T) {
	ds := newDS("agent", map[string]string{daemon.AnnotationCanary: "canary=true", daemon.AnnotationPartition: "2",
		daemon.AnnotationWaves: "zone"})
	client := fake.NewClientset(ds)
	msg, err := Promote(context.Background(), client, ns, "agent")
	if err != nil || msg != "daemonset.apps/agent promoted (removed rollout.everynode.dev/canary, rollout.everynode.dev/partition)" {
		t.Fatalf("Promote = %q, %v", msg, err)
	}
	got := getDS(t, client, "agent").Annotations
	if len(got) != 1 || got[daemon.AnnotationWaves] != "zone" {
		t.Errorf("annotations = %v", got)
	}
	if msg, err := Promote(context.Background(), client, ns, "agent"); err != nil || !strings.Contains(msg, "nothing to promote") {
		t.Errorf("second Promote = %q, %v", msg, err)
	}
}

func TestUndo(t *testing.T) {
	ds := newDS("agent", nil)
	rev1, _ := revision(t, ds, 1)
	ds.Spec.Template.Spec.Containers[0].Image = "img:v2"
	rev2, _ := revision(t, ds, 2)
	ds.Spec.Template.Spec.Containers[0].Image = "img:v3"
	rev3, _ := revision(t, ds, 3)
	client := fake.NewClientset(ds, rev1, rev2, rev3)
	image := func() string { return getDS(t, client, "agent").Spec.Template.Spec.Containers[0].Image }

	msg, err := Undo(context.Background(), client, ns, "agent", 0)
	if err != nil || msg != "daemonset.apps/agent rolled back" || image() != "img:v2" {
		t.Fatalf("Undo = %q, %v; image %s", msg, err, image())
	}
	if msg, err := Undo(context.Background(), client, ns, "agent", 1); err != nil || image() != "img:v1" {
		t.Fatalf("Undo --to-revision 1 = %q, %v; image %s", msg, err, image())
	}
	if msg, err := Undo(context.Background(), client, ns, "agent", 1); err != nil || !strings.Contains(msg, "skipped rollback") {
		t.Errorf("Undo to the current template = %q, %v", msg, err)
	}
	_, err = Undo(context.Background(), client, ns, "agent", 7)
	if err == nil || !strings.Contains(err.Error(), "unable to find specified revision 7 in history") ||
		!strings.Contains(err.Error(), "everynode kubectl rollout history daemonset/agent -n prod") {
		t.Errorf("Undo to a missing revision: %v", err)
	}
}

func TestUndoWithoutHistory(t *testing.T) {
	ds := newDS("agent", nil)
	rev1, _ := revision(t, ds, 1)
	client := fake.NewClientset(ds, rev1)
	if _, err := Undo(context.Background(), client, ns, "agent", 0); err == nil || !strings.Contains(err.Error(), "no last revision to roll back to") {
		t.Errorf("err = %v", err)
	}
}
