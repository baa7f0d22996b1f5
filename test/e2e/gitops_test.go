package e2e

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/everynode/everynode/internal/gitops"
	"github.com/everynode/everynode/internal/nodesim"
)

// What GitOps tools see of everynode's rollouts: kstatus (Flux's health checks, Helm
// 4's --wait) and the chart's Argo CD health check, computed on every version of the
// DaemonSet the API server holds during real rollouts, in both modes.

// verdict is what the tools say of one version of a DaemonSet.
type verdict struct {
	kstatus status.Status
	argo    gitops.Health
}

func (v verdict) String() string { return fmt.Sprintf("%s/%s", v.kstatus, v.argo.Status) }

func verdictOf(t *testing.T, ds *apps.DaemonSet) verdict {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ds)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion("apps/v1")
	u.SetKind("DaemonSet")
	res, err := status.Compute(u)
	if err != nil {
		t.Fatalf("kstatus: %v", err)
	}
	h, err := gitops.ArgoCDHealth(u.Object)
	if err != nil {
		t.Fatalf("the Argo CD health check: %v", err)
	}
	return verdict{kstatus: res.Status, argo: h}
}

// waitVerdict waits until kstatus and Argo CD say want of the DaemonSet, and returns
// it as it was then.
func waitVerdict(t *testing.T, client kubernetes.Interface, ns, name string, kstatus status.Status, argo string) *apps.DaemonSet {
	t.Helper()
	var found *apps.DaemonSet
	var last verdict
	err := wait.PollUntilContextTimeout(context.Background(), pollInterval, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		ds, err := client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = verdictOf(t, ds)
		found = ds
		return last.kstatus == kstatus && last.argo.Status == argo, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s/%s of %s: last saw %s (%q)", kstatus, argo, name, last, last.argo.Message)
	}
	return found
}

// versionLog keeps every version of a DaemonSet a watch delivers: one per write.
type versionLog struct {
	stopWatch func()
	mu        sync.Mutex
	versions  []*apps.DaemonSet
}

func watchVersions(t *testing.T, client kubernetes.Interface, ns, name string) *versionLog {
	t.Helper()
	l := &versionLog{}
	l.stopWatch = watchDaemonSet(t, client, ns, name, func(ds *apps.DaemonSet) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.versions = append(l.versions, ds.DeepCopy())
	})
	return l
}

func (l *versionLog) stop() []*apps.DaemonSet {
	l.stopWatch()
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.versions)
}

// checkNoWriteForConditionsAlone fails the test when one write (a version and the
// one before it) changed nothing but the Reconciling and Stalled conditions: they
// must ride in writes everynode makes anyway. It returns how many writes it saw.
func checkNoWriteForConditionsAlone(t *testing.T, versions []*apps.DaemonSet) int {
	t.Helper()
	strip := func(ds *apps.DaemonSet) *apps.DaemonSet {
		c := ds.DeepCopy()
		c.ResourceVersion, c.ManagedFields = "", nil
		c.Status.Conditions = slices.DeleteFunc(c.Status.Conditions, func(x apps.DaemonSetCondition) bool {
			return x.Type == "Reconciling" || x.Type == "Stalled"
		})
		return c
	}
	for i := 1; i < len(versions); i++ {
		if reflect.DeepEqual(strip(versions[i-1]), strip(versions[i])) {
			t.Errorf("write %d (resourceVersion %s) changed only Reconciling or Stalled: %+v", i, versions[i].ResourceVersion, versions[i].Status.Conditions)
		}
	}
	return len(versions) - 1
}

// conditionTypes lists the types of the DaemonSet's conditions.
func conditionTypes(ds *apps.DaemonSet) []string {
	var out []string
	for _, c := range ds.Status.Conditions {
		out = append(out, string(c.Type))
	}
	return out
}

// underWay returns the versions from the first of generation gen up to, not
// including, the first whose Progressing condition says revision rev is available
// everywhere: the rollout as the API showed it.
func underWay(versions []*apps.DaemonSet, gen int64, rev int) []*apps.DaemonSet {
	var out []*apps.DaemonSet
	for _, ds := range versions {
		if ds.Generation < gen {
			continue
		}
		if c := progressingOf(ds); c != nil && c.Reason == "NewRevisionAvailable" && strings.Contains(c.Message, fmt.Sprintf("revision %d ", rev)) {
			break
		}
		out = append(out, ds)
	}
	return out
}

func verdicts(t *testing.T, versions []*apps.DaemonSet) []verdict {
	var out []verdict
	for _, ds := range versions {
		v := verdictOf(t, ds)
		if len(out) == 0 || out[len(out)-1].String() != v.String() {
			out = append(out, v)
		}
	}
	return out
}

// TestGitOpsFullMode: in a sandbox whose DaemonSet controller is everynode, a
// settled DaemonSet is Current/Healthy; paused with a new template,
// InProgress/Suspended; resumed, it finishes Current/Healthy; a release whose pods
// never become Ready, with a progress deadline and on-failure: pause, ends
// Failed/Degraded with everynode's message.
func TestGitOpsFullMode(t *testing.T) {
	_, client, nodes := ownSandbox(t, "everynode", 3)
	ns := "gitops-full"
	createNamespace(t, client, ns)
	ds := daemonSet(ns, "agent", nil)
	ds.Annotations = map[string]string{annProgressDeadline: "20s", annOnFailure: "pause", annMinHealthy: "2s"}
	if _, err := client.AppsV1().DaemonSets(ns).Create(context.Background(), ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitVerdict(t, client, ns, "agent", status.CurrentStatus, "Healthy")
	log := watchVersions(t, client, ns, "agent")

	mutateDaemonSet(t, client, ns, "agent", func(ds *apps.DaemonSet) {
		ds.Annotations[annPaused] = "true"
		ds.Spec.Template.Spec.Containers[0].Image = imageV2
	})
	paused := waitVerdict(t, client, ns, "agent", status.InProgressStatus, "Suspended")
	uids := podUIDs(t, client, ns)
	consistently(t, "a paused rollout stays InProgress/Suspended and replaces no pod", 3*time.Second, func(ctx context.Context) (bool, error) {
		ds, err := client.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		v := verdictOf(t, ds)
		return v.kstatus == status.InProgressStatus && v.argo.Status == "Suspended" && samePodUIDs(ctx, client, ns, uids), nil
	})

	mutateDaemonSet(t, client, ns, "agent", func(ds *apps.DaemonSet) { delete(ds.Annotations, annPaused) })
	waitProgressing(t, client, ns, "agent", "True", "NewRevisionAvailable")
	done := waitVerdict(t, client, ns, "agent", status.CurrentStatus, "Healthy")
	// The annotation is metadata: resuming leaves the generation as it was.
	resumed := verdicts(t, underWay(log.stop(), paused.Generation, 2))
	t.Logf("resumed: %v; done: %q", resumed, verdictOf(t, done).argo.Message)
	if !slices.ContainsFunc(resumed, func(v verdict) bool { return v.argo.Status == "Progressing" }) {
		t.Errorf("Argo CD never saw the resumed rollout Progressing: %v", resumed)
	}
	for _, v := range resumed {
		if v.kstatus == status.CurrentStatus || v.argo.Status == "Healthy" {
			t.Errorf("while the rollout was under way the tools said %v: %v", v, resumed)
		}
	}

	log = watchVersions(t, client, ns, "agent")
	mutateDaemonSet(t, client, ns, "agent", func(ds *apps.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Image = imageV1
		ds.Spec.Template.Annotations = map[string]string{nodesim.AnnotationReady: "false"}
	})
	failed := waitVerdict(t, client, ns, "agent", status.FailedStatus, "Degraded")
	v := verdictOf(t, failed)
	stalled := conditionOf(failed, "Stalled")
	if stalled == nil || v.argo.Message != stalled.Message || stalled.Reason != "ProgressDeadlineExceeded" || !strings.HasPrefix(stalled.Message, "revision 3 failed") {
		t.Errorf("Degraded with message %q, Stalled %+v; want everynode's message of the deadline", v.argo.Message, stalled)
	}
	writes := checkNoWriteForConditionsAlone(t, log.stop())
	t.Logf("failed: %s (%q); %d writes to the DaemonSet during the failing release, on %d nodes", v, v.argo.Message, writes, len(nodes))
}

func conditionOf(ds *apps.DaemonSet, typ string) *apps.DaemonSetCondition {
	for i := range ds.Status.Conditions {
		if string(ds.Status.Conditions[i].Type) == typ {
			return &ds.Status.Conditions[i]
		}
	}
	return nil
}

// TestGitOpsCompanionMode: beside kube-controller-manager's DaemonSet controller,
// while everynode rolls an OnDelete DaemonSet out, Argo CD never calls it Healthy
// and sees it Progressing, kstatus sees it InProgress, and both end Current/Healthy;
// everynode's conditions survive every status write kube-controller-manager makes,
// and none of everynode's writes is for them alone. A plain OnDelete DaemonSet keeps
// Argo CD's own verdict.
func TestGitOpsCompanionMode(t *testing.T) {
	c := startCompanionCluster(t)

	t.Run("rollout", func(t *testing.T) {
		ns, _ := c.deploy(t, map[string]string{annMinHealthy: "2s"}, nil)
		waitProgressing(t, c.client, ns, "agent", "True", "NewRevisionAvailable")
		waitVerdict(t, c.client, ns, "agent", status.CurrentStatus, "Healthy")
		log := watchVersions(t, c.client, ns, "agent")
		before := c.proxy.Snapshot()
		mutateDaemonSet(t, c.client, ns, "agent", func(ds *apps.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = imageV2 })
		c.waitAllOn(t, ns, 2)
		waitProgressing(t, c.client, ns, "agent", "True", "NewRevisionAvailable")
		waitVerdict(t, c.client, ns, "agent", status.CurrentStatus, "Healthy")
		versions := log.stop()
		checkWrites(t, writesOf(c.proxy.Snapshot().Sub(before)), 4, 4, 0)
		writes := checkNoWriteForConditionsAlone(t, versions)

		during := underWay(versions, versions[0].Generation+1, 2)
		seen := verdicts(t, during)
		t.Logf("%d writes to the DaemonSet; while under way (%d versions) the tools said %v", writes, len(during), seen)
		if !slices.ContainsFunc(seen, func(v verdict) bool { return v.argo.Status == "Progressing" }) {
			t.Errorf("Argo CD never saw the rollout Progressing: %v", seen)
		}
		for _, v := range seen {
			if v.argo.Status == "Healthy" || v.kstatus != status.InProgressStatus {
				t.Errorf("while the rollout was under way the tools said %v: %v", v, seen)
			}
		}
		// kube-controller-manager writes the status many times during the rollout,
		// from objects it read before everynode's last condition write; no write
		// may drop or undo one of the conditions.
		others := 0
		for i, ds := range versions {
			if got := conditionTypes(ds); !slices.Equal(got, []string{"Progressing", "Reconciling", "Stalled"}) {
				t.Errorf("version %s carries the conditions %v", ds.ResourceVersion, got)
			}
			if i == 0 {
				continue
			}
			if reflect.DeepEqual(ds.Status.Conditions, versions[i-1].Status.Conditions) {
				others++
			}
			if now, before := progressingOf(ds), progressingOf(versions[i-1]); now != nil && before != nil && now.LastTransitionTime.Before(&before.LastTransitionTime) {
				t.Errorf("version %s took the Progressing condition back to %s/%s of %v", ds.ResourceVersion, now.Status, now.Reason, now.LastTransitionTime)
			}
		}
		t.Logf("%d of %d writes left the conditions as they were (kube-controller-manager's among them)", others, writes)
	})

	t.Run("plain_OnDelete_keeps_Argo_CDs_verdict", func(t *testing.T) {
		ns := "companion-plain-ondelete"
		createNamespace(t, c.client, ns)
		ds := daemonSet(ns, "agent", nil)
		ds.Spec.UpdateStrategy = apps.DaemonSetUpdateStrategy{Type: apps.OnDeleteDaemonSetStrategyType}
		if _, err := c.client.AppsV1().DaemonSets(ns).Create(context.Background(), ds, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.waitAllOn(t, ns, 1)
		log := watchVersions(t, c.client, ns, "agent")
		mutateDaemonSet(t, c.client, ns, "agent", func(ds *apps.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = imageV2 })
		pollUntil(t, "kube-controller-manager to observe the new template", func(ctx context.Context) (bool, error) {
			ds, err := c.client.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
			return err == nil && ds.Status.ObservedGeneration == ds.Generation && ds.Generation == 2, nil
		})
		versions := log.stop()
		for _, ds := range versions {
			// Argo CD's built-in check for an OnDelete DaemonSet: Progressing until
			// its generation is observed, then Healthy, counting updated pods.
			want := gitops.Health{Status: "Healthy", Message: fmt.Sprintf("daemon set %d out of %d new pods have been updated",
				ds.Status.UpdatedNumberScheduled, ds.Status.DesiredNumberScheduled)}
			if ds.Generation > ds.Status.ObservedGeneration {
				want = gitops.Health{Status: "Progressing", Message: "Waiting for rollout to finish: observed daemon set generation less than desired generation"}
			}
			if got := verdictOf(t, ds).argo; got != want {
				t.Errorf("version %s: %+v, want Argo CD's own %+v", ds.ResourceVersion, got, want)
			}
			if len(ds.Status.Conditions) > 0 {
				t.Errorf("everynode wrote conditions on a DaemonSet it does not roll out: %v", conditionTypes(ds))
			}
		}
		t.Logf("%d versions compared", len(versions))
	})
}
