package chart

import (
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/everynode/everynode/charts"
)

func TestRender_ChecksValuesAgainstTheSchema(t *testing.T) {
	c, err := Load(charts.Everynode())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Render(c, "everynode", "everynode", map[string]any{"mode": "sideways"}); err == nil || !strings.Contains(err.Error(), "mode") {
		t.Fatalf("mode=sideways rendered with error %v, want the schema's refusal naming mode", err)
	}
	objs, err := Render(c, "rel", "ns", map[string]any{"mode": "full"})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "Deployment" && o.GetName() != "rel-everynode" {
			t.Errorf("the release rel's Deployment is named %s, want rel-everynode (the chart's fullname)", o.GetName())
		}
	}
	if len(objs) < 5 {
		t.Errorf("the chart rendered %d objects, want its Deployment, RBAC, Service and PodDisruptionBudget", len(objs))
	}
}

// argocdHealthCheck.enabled renders the health check, word for word, under the key
// Argo CD reads from argocd-cm; it is off by default.
func TestRender_ArgoCDHealthCheck(t *testing.T) {
	c, err := Load(charts.Everynode())
	if err != nil {
		t.Fatal(err)
	}
	script, err := fs.ReadFile(charts.Everynode(), "files/argocd-health.lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, enabled := range []bool{false, true} {
		objs, err := Render(c, "everynode", "everynode", map[string]any{"argocdHealthCheck": map[string]any{"enabled": enabled}})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range objs {
			if o.GetKind() != "ConfigMap" || o.GetName() != "everynode-argocd-health" {
				continue
			}
			v, _, _ := unstructured.NestedString(o.Object, "data", "resource.customizations.health.apps_DaemonSet")
			got = append(got, v)
		}
		switch {
		case !enabled && len(got) != 0:
			t.Errorf("disabled, the chart rendered %d health check ConfigMaps", len(got))
		case enabled && (len(got) != 1 || got[0] != strings.TrimRight(string(script), "\n")):
			t.Errorf("enabled, the chart rendered %q, want files/argocd-health.lua under resource.customizations.health.apps_DaemonSet", got)
		}
	}
}

// rolloutStatusHook renders a post-install/post-upgrade Job that waits for each
// listed DaemonSet, a read-only ServiceAccount for it with a Role in each namespace
// named, and nothing of the controller when controller.enabled is false.
func TestRender_RolloutStatusHook(t *testing.T) {
	c, err := Load(charts.Everynode())
	if err != nil {
		t.Fatal(err)
	}
	hook := map[string]any{"enabled": true, "daemonSets": []any{"agent", "kube-system/node-exporter"}}
	objs, err := Render(c, "rel", "apps", map[string]any{"controller": map[string]any{"enabled": false}, "rolloutStatusHook": hook})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string][]string{}
	var job *unstructured.Unstructured
	for _, o := range objs {
		kinds[o.GetKind()] = append(kinds[o.GetKind()], o.GetNamespace()+"/"+o.GetName())
		if o.GetKind() == "Job" {
			job = o
		}
	}
	want := map[string][]string{
		"ServiceAccount":     {"apps/rel-everynode-rollout-status"},
		"ClusterRole":        {"/rel-everynode-rollout-status"},
		"ClusterRoleBinding": {"/rel-everynode-rollout-status"},
		"Role":               {"apps/rel-everynode-rollout-status", "kube-system/rel-everynode-rollout-status"},
		"RoleBinding":        {"apps/rel-everynode-rollout-status", "kube-system/rel-everynode-rollout-status"},
		"Job":                {"apps/rel-everynode-rollout-status"},
	}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Fatalf("controller.enabled=false with the hook rendered\n%v\nwant only the hook's objects\n%v", kinds, want)
	}
	if got := job.GetAnnotations()["helm.sh/hook"]; got != "post-install,post-upgrade" {
		t.Errorf("the Job's helm.sh/hook is %q, want post-install,post-upgrade", got)
	}
	sa, _, _ := unstructured.NestedString(job.Object, "spec", "template", "spec", "serviceAccountName")
	if sa != "rel-everynode-rollout-status" {
		t.Errorf("the Job runs as ServiceAccount %q, want the hook's own", sa)
	}
	containers, _, _ := unstructured.NestedSlice(job.Object, "spec", "template", "spec", "containers")
	var args []string
	for _, ctr := range containers {
		a, _, _ := unstructured.NestedStringSlice(ctr.(map[string]any), "args")
		args = append(args, strings.Join(a, " "))
	}
	wantArgs := []string{
		"rollout status agent --namespace=apps --timeout=4m",
		"rollout status node-exporter --namespace=kube-system --timeout=4m",
	}
	if fmt.Sprint(args) != fmt.Sprint(wantArgs) {
		t.Errorf("the Job's containers run %q, want %q", args, wantArgs)
	}

	podLabels, _, _ := unstructured.NestedStringMap(job.Object, "spec", "template", "metadata", "labels")
	if podLabels["app.kubernetes.io/name"] == "everynode" {
		t.Errorf("the hook's pod has labels %v, which the controller's Service and PodDisruptionBudget select", podLabels)
	}

	// The controller's own objects are there by default, and the hook is not.
	objs, err = Render(c, "rel", "apps", nil)
	if err != nil {
		t.Fatal(err)
	}
	var deployments, jobs int
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			deployments++
		case "Job":
			jobs++
		}
	}
	if deployments != 1 || jobs != 0 {
		t.Errorf("by default the chart rendered %d Deployments and %d Jobs, want the controller's Deployment and no hook", deployments, jobs)
	}

	// Bad values are refused with a message that names them.
	for _, tc := range []struct {
		hook map[string]any
		want string
	}{
		{map[string]any{"enabled": true}, "rolloutStatusHook.daemonSets is empty"},
		{map[string]any{"enabled": true, "daemonSets": []any{"a/b/c"}}, "daemonSets"},
		{map[string]any{"enabled": true, "daemonSets": []any{"agent"}, "timeout": "soon"}, "timeout"},
	} {
		if _, err := Render(c, "rel", "apps", map[string]any{"rolloutStatusHook": tc.hook}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("rolloutStatusHook %v rendered with error %v, want one naming %q", tc.hook, err, tc.want)
		}
	}
}

// nodeGate.enabled alone lets the controller patch nodes, and tells it whether to
// run the gate; off, its ClusterRole only reads nodes.
func TestRender_NodeGate(t *testing.T) {
	c, err := Load(charts.Everynode())
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"full", "companion"} {
		for _, enabled := range []bool{false, true} {
			objs, err := Render(c, "everynode", "everynode", map[string]any{"mode": mode, "nodeGate": map[string]any{"enabled": enabled}})
			if err != nil {
				t.Fatal(err)
			}
			patchesNodes, arg := false, ""
			for _, o := range objs {
				switch o.GetKind() {
				case "ClusterRole":
					rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
					for _, r := range rules {
						rule := r.(map[string]any)
						if fmt.Sprint(rule["resources"]) == "[nodes]" && strings.Contains(fmt.Sprint(rule["verbs"]), "patch") {
							patchesNodes = true
						}
					}
				case "Deployment":
					containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
					args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
					for _, a := range args {
						if strings.HasPrefix(a, "--node-gate=") {
							arg = a
						}
					}
				}
			}
			if patchesNodes != enabled || arg != fmt.Sprintf("--node-gate=%v", enabled) {
				t.Errorf("%s mode, nodeGate.enabled=%v: node patch granted %v, controller arg %q", mode, enabled, patchesNodes, arg)
			}
		}
	}
	if _, err := Render(c, "everynode", "everynode", map[string]any{"nodeGate": map[string]any{"enabled": "yes"}}); err == nil {
		t.Error("nodeGate.enabled=\"yes\" rendered; want the schema's refusal")
	}
}
