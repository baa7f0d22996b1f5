package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/everynode/everynode/internal/daemon"
	"github.com/everynode/everynode/internal/rolloutplan"
)

var planStart = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// planCluster is DaemonSet default/agent at image v1 (revision 1) on three nodes of
// two zones, each running a Ready pod of it, as the API server would hold them.
func planCluster(t *testing.T) *fake.Clientset {
	one := intstr.FromInt32(1)
	ds := &apps.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "default", UID: "uid-agent", Generation: 1,
			Annotations: map[string]string{daemon.TemplateGenerationAnnotation: "1"}},
		Spec: apps.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "agent", Image: "agent:v1"}}},
			},
			UpdateStrategy: apps.DaemonSetUpdateStrategy{Type: apps.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &apps.RollingUpdateDaemonSet{MaxUnavailable: &one}},
		},
	}
	patch, err := daemon.TemplatePatch(&ds.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	hash := daemon.TemplateHash(&ds.Spec.Template, nil)
	objs := []runtime.Object{ds, &apps.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-" + hash, Namespace: "default", UID: "uid-rev1",
			Labels:          map[string]string{"app": "agent", daemon.HashLabel: hash},
			OwnerReferences: []metav1.OwnerReference{*daemon.ControllerRef(ds)}},
		Data: runtime.RawExtension{Raw: patch}, Revision: 1,
	}}
	since := metav1.NewTime(planStart.Add(-time.Hour))
	for i, zone := range []string{"a", "a", "b"} {
		node := fmt.Sprintf("node-%d", i+1)
		objs = append(objs,
			&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{"zone": zone}}},
			&v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "agent-" + node, Namespace: "default", UID: types.UID("uid-" + node),
					Labels:          map[string]string{"app": "agent", daemon.HashLabel: hash, "pod-template-generation": "1"},
					OwnerReferences: []metav1.OwnerReference{*daemon.ControllerRef(ds)}, CreationTimestamp: since},
				Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "agent", Image: "agent:v1"}}},
				Status: v1.PodStatus{Phase: v1.PodRunning,
					Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: since}}},
			})
	}
	client := fake.NewClientset(objs...)
	// A dry run is answered as the API server does — a changed template moves the
	// template generation on — and nothing is stored.
	client.PrependReactor("update", "daemonsets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		u, ok := a.(clienttesting.UpdateActionImpl)
		if !ok || !slices.Equal(u.UpdateOptions.DryRun, []string{metav1.DryRunAll}) {
			return false, nil, nil
		}
		next := u.GetObject().(*apps.DaemonSet).DeepCopy()
		obj, err := client.Tracker().Get(apps.SchemeGroupVersion.WithResource("daemonsets"), next.Namespace, next.Name)
		if err != nil {
			return true, nil, err
		}
		if cur := obj.(*apps.DaemonSet); !equality.Semantic.DeepEqual(cur.Spec.Template, next.Spec.Template) {
			g, _ := strconv.Atoi(cur.Annotations[daemon.TemplateGenerationAnnotation])
			next.Annotations[daemon.TemplateGenerationAnnotation] = strconv.Itoa(g + 1)
		}
		return true, next, nil
	})
	return client
}

const planManifest = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
  annotations:
    rollout.everynode.dev/waves: zone
    rollout.everynode.dev/wave-pause: 1m
spec:
  selector:
    matchLabels: {app: agent}
  updateStrategy:
    type: RollingUpdate
    rollingUpdate: {maxUnavailable: 1}
  template:
    metadata:
      labels: {app: agent}
    spec:
      containers:
      - name: agent
        image: agent:%s
`

// The command's path from the API to the printed plan: it only reads the cluster,
// and plans the manifest's rollout wave by wave; the manifest of what runs plans
// nothing.
func TestRolloutPlanCommand(t *testing.T) {
	client := planCluster(t)
	o := rolloutplan.Options{Start: planStart, PodStart: 5 * time.Second}
	s, err := planRollout(context.Background(), client, planTarget{ns: "default", file: "agent.yaml",
		manifest: fmt.Appendf(nil, planManifest, "v2")}, o)
	if err != nil {
		t.Fatal(err)
	}
	dryRuns := 0
	for _, a := range client.Actions() {
		if u, ok := a.(clienttesting.UpdateActionImpl); ok && slices.Equal(u.UpdateOptions.DryRun, []string{metav1.DryRunAll}) {
			dryRuns++
			continue
		}
		if a.GetVerb() != "get" && a.GetVerb() != "list" {
			t.Errorf("the plan made a %s call on %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
	if dryRuns != 1 {
		t.Errorf("%d dry-run updates, want the manifest's one", dryRuns)
	}
	var out bytes.Buffer
	if err := s.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Rollout plan for daemonset default/agent: revision 1 -> 2, 3 of 3 nodes to update",
		"STEP  AT       WAVE  NODES   THEN WAITS FOR\n" +
			"1     t+0s     a     node-1  maxUnavailable 1 used: new pods Ready (pod-start 5s)\n" +
			"2     t+5s     a     node-2  new pods Ready (pod-start 5s), then wave-pause 1m\n" +
			"3     t+1m10s  b     node-3  new pods Ready (pod-start 5s)\n",
		"Complete at t+1m15s: revision 2 available on 3 of 3 nodes.",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the plan does not say %q:\n%s", want, out.String())
		}
	}

	s, err = planRollout(context.Background(), client, planTarget{ns: "default", file: "agent.yaml",
		manifest: fmt.Appendf(nil, planManifest, "v1")}, o)
	if err != nil {
		t.Fatal(err)
	}
	if s.End.State != rolloutplan.Complete || len(s.Steps) != 0 {
		t.Errorf("the manifest of what runs plans %d steps, ending %+v", len(s.Steps), s.End)
	}
}

func TestRolloutPlanErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		target  planTarget
		wantErr string
	}{
		{"no such DaemonSet", planTarget{ns: "default", name: "nope"}, `DaemonSet "nope" not found in namespace "default": pass -n NAMESPACE`},
		{"manifest of another DaemonSet", planTarget{ns: "default", name: "agent", file: "x.yaml",
			manifest: []byte(strings.Replace(fmt.Sprintf(planManifest, "v2"), "name: agent", "name: other", 1))},
			`x.yaml: it holds no DaemonSet named "agent"`},
		{"manifest without a name", planTarget{ns: "default", file: "x.yaml",
			manifest: []byte(strings.Replace(fmt.Sprintf(planManifest, "v2"), "  name: agent\n", "", 1))},
			"x.yaml: its DaemonSet has no metadata.name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := planRollout(context.Background(), planCluster(t), tc.target, rolloutplan.Options{Start: planStart})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want one line saying %q", err, tc.wantErr)
			}
		})
	}
	f := rolloutPlanFlags{podStart: -time.Second, maxTime: time.Hour}
	if err := f.check("agent"); err == nil || !strings.Contains(err.Error(), "--pod-start -1s is negative") {
		t.Errorf("negative --pod-start: %v", err)
	}
	f = rolloutPlanFlags{maxTime: time.Hour}
	if err := f.check(""); err == nil || !strings.Contains(err.Error(), "name the DaemonSet") {
		t.Errorf("neither a name nor -f: %v", err)
	}
}
