package daemon

import (
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// After a rollback, a template pushed before the restored revision was available
// everywhere is a rollout of its own: the condition says so, and the progress deadline
// applies to it.
func TestNewTemplateAfterRollbackIsWatchedAgain(t *testing.T) {
	v1DS, v2DS := newDS("ds"), newDS("ds", withImage("img:v2"))
	ds := newDS("ds", withImage("img:v4"), func(ds *apps.DaemonSet) {
		ds.Annotations = map[string]string{AnnotationProgressDeadline: "10m", AnnotationOnFailure: OnFailureRollback}
		ds.Status.Conditions = []apps.DaemonSetCondition{{Type: ConditionProgressing, Status: v1.ConditionFalse,
			Reason: string(ReasonRolledBack), Message: "revision 2 failed; rolled back to revision 1",
			LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))}}
	})
	failed := revision(ds, "ds-v2", hashOf(v2DS), 2, mustPatch(t, v2DS))
	failed.Annotations = map[string]string{MarkFailed: "2 ProgressDeadlineExceeded: stuck"}
	restored := revision(ds, "ds-v1", hashOf(v1DS), 3, mustPatch(t, v1DS))
	restored.Annotations = map[string]string{MarkAvailable: t0.Add(-2 * time.Hour).Format(time.RFC3339)}
	s := snap(ds, nodes("n1", "n2"),
		newPod(ds, "v1-n1", "n1", withHash(hashOf(v1DS))),
		newPod(ds, "v4-n2", "n2", notReady(), createdAt(t0.Add(-time.Hour))))
	s.Revisions = []*apps.ControllerRevision{failed, restored, revision(ds, "ds-v4", hashOf(ds), 4, mustPatch(t, ds))}

	p := Decide(s)
	if p.Status == nil || Progressing(p.Status) == nil || Reason(Progressing(p.Status).Reason) != ReasonRollingOut {
		t.Fatalf("Progressing after a new template = %+v, want RollingOut", p.Status)
	}
	ds.Status = *p.Status
	s.Now = t0.Add(11 * time.Minute)
	p = Decide(s)
	if p.Rollback == nil || p.Rollback.Name != "ds-v1" {
		t.Errorf("11 minutes later the unavailable revision 4 is not rolled back: rollback %v, status %+v", p.Rollback, Progressing(p.Status))
	}
}
