package controller

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"

	"github.com/everynode/everynode/internal/daemon"
)

// Helpers that write and read the harness's cluster through the fake API.

// --- cluster objects ---

func (h *harness) createNode(name string, labels map[string]string, taints ...v1.Taint) *v1.Node {
	h.t.Helper()
	l := map[string]string{v1.LabelHostname: name}
	for k, v := range labels {
		l[k] = v
	}
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l},
		Spec:       v1.NodeSpec{Taints: taints},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{
			{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Now()},
		}},
	}
	created, err := h.client.CoreV1().Nodes().Create(h.ctx, node, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatalf("creating node %s: %v", name, err)
	}
	return created
}

// createNodes creates nodes named prefix-0 ... prefix-(n-1) and returns their names.
func (h *harness) createNodes(prefix string, n int, labels map[string]string) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
		h.createNode(names[i], labels)
	}
	return names
}

func (h *harness) updateNode(name string, mutate func(*v1.Node)) {
	h.t.Helper()
	h.inv.touch(name)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := h.client.CoreV1().Nodes().Get(h.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(node)
		_, err = h.client.CoreV1().Nodes().Update(h.ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		h.t.Fatalf("updating node %s: %v", name, err)
	}
}

// newDaemonSet is a RollingUpdate (maxUnavailable 1) DaemonSet selecting app=name,
// at generation 1, as the API server would store it.
func newDaemonSet(name string) *apps.DaemonSet {
	labels := map[string]string{"app": name}
	return &apps.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: testNamespace, Generation: 1,
			Annotations: map[string]string{daemon.TemplateGenerationAnnotation: "1"},
		},
		Spec: apps.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "agent", Image: "example.com/agent:v1"}}},
			},
			UpdateStrategy: rollingUpdate(1, 0),
		},
	}
}

func rollingUpdate(maxUnavailable, maxSurge int32) apps.DaemonSetUpdateStrategy {
	u, s := intstr.FromInt32(maxUnavailable), intstr.FromInt32(maxSurge)
	return apps.DaemonSetUpdateStrategy{
		Type:          apps.RollingUpdateDaemonSetStrategyType,
		RollingUpdate: &apps.RollingUpdateDaemonSet{MaxUnavailable: &u, MaxSurge: &s},
	}
}

func (h *harness) createDaemonSet(ds *apps.DaemonSet) *apps.DaemonSet {
	h.t.Helper()
	created, err := h.client.AppsV1().DaemonSets(ds.Namespace).Create(h.ctx, ds, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatalf("creating DaemonSet %s: %v", ds.Name, err)
	}
	return created
}

func (h *harness) updateDaemonSet(name string, mutate func(*apps.DaemonSet)) *apps.DaemonSet {
	h.t.Helper()
	var updated *apps.DaemonSet
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ds, err := h.client.AppsV1().DaemonSets(testNamespace).Get(h.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(ds)
		updated, err = h.client.AppsV1().DaemonSets(testNamespace).Update(h.ctx, ds, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		h.t.Fatalf("updating DaemonSet %s: %v", name, err)
	}
	return updated
}

// changeTemplate changes the DaemonSet's template and, as the API server would, bumps
// its generation and template-generation annotation.
func (h *harness) changeTemplate(name string, mutate func(*v1.PodTemplateSpec)) *apps.DaemonSet {
	return h.updateDaemonSet(name, func(ds *apps.DaemonSet) {
		mutate(&ds.Spec.Template)
		ds.Generation++
		ds.Annotations[daemon.TemplateGenerationAnnotation] = strconv.FormatInt(ds.Generation, 10)
	})
}

// --- reading the cluster ---

func (h *harness) daemonSet(name string) *apps.DaemonSet {
	h.t.Helper()
	ds, err := h.client.AppsV1().DaemonSets(testNamespace).Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatalf("reading DaemonSet %s: %v", name, err)
	}
	return ds
}

func (h *harness) allPods() []v1.Pod {
	h.t.Helper()
	list, err := h.client.CoreV1().Pods(testNamespace).List(h.ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatalf("listing pods: %v", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

// podsOf returns the pods ds controls, by name.
func (h *harness) podsOf(ds *apps.DaemonSet) []v1.Pod {
	var out []v1.Pod
	for _, pod := range h.allPods() {
		if ref := metav1.GetControllerOf(&pod); ref != nil && ref.UID == ds.UID {
			out = append(out, pod)
		}
	}
	return out
}

func (h *harness) podsByNode(ds *apps.DaemonSet) map[string][]v1.Pod {
	out := map[string][]v1.Pod{}
	for _, pod := range h.podsOf(ds) {
		node, _ := daemon.TargetNode(&pod)
		out[node] = append(out[node], pod)
	}
	return out
}

func (h *harness) revisionsOf(ds *apps.DaemonSet) []apps.ControllerRevision {
	h.t.Helper()
	list, err := h.client.AppsV1().ControllerRevisions(ds.Namespace).List(h.ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatalf("listing revisions: %v", err)
	}
	var out []apps.ControllerRevision
	for _, r := range list.Items {
		if ref := metav1.GetControllerOf(&r); ref != nil && ref.UID == ds.UID {
			out = append(out, r)
		}
	}
	return out
}

// currentHash is the hash label of ds's revision that records its current template,
// or "" when there is none yet.
func (h *harness) currentHash(ds *apps.DaemonSet) string {
	h.t.Helper()
	patch, err := daemon.TemplatePatch(&ds.Spec.Template)
	if err != nil {
		h.t.Fatalf("TemplatePatch: %v", err)
	}
	for _, r := range h.revisionsOf(ds) {
		if bytes.Equal(r.Data.Raw, patch) {
			return r.Labels[daemon.HashLabel]
		}
	}
	return ""
}

func (h *harness) events(reason string) []v1.Event {
	h.t.Helper()
	list, err := h.client.CoreV1().Events(testNamespace).List(h.ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatalf("listing events: %v", err)
	}
	var out []v1.Event
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func isRunningReady(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodRunning && daemon.IsReady(pod)
}

// converged reports whether the DaemonSet runs exactly one Running, Ready pod of its
// current revision on each of nodes and none elsewhere, and its status says so for
// its current generation.
func (h *harness) converged(name string, nodes []string) bool {
	ds := h.daemonSet(name)
	hash := h.currentHash(ds)
	if hash == "" {
		return false
	}
	byNode := h.podsByNode(ds)
	if len(byNode) != len(nodes) {
		return false
	}
	for _, node := range nodes {
		pods := byNode[node]
		if len(pods) != 1 || !isRunningReady(&pods[0]) || pods[0].Labels[daemon.HashLabel] != hash {
			return false
		}
	}
	n := int32(len(nodes))
	s := ds.Status
	return s.ObservedGeneration == ds.Generation && s.DesiredNumberScheduled == n &&
		s.CurrentNumberScheduled == n && s.NumberReady == n && s.NumberAvailable == n &&
		s.UpdatedNumberScheduled == n && s.NumberMisscheduled == 0 && s.NumberUnavailable == 0
}

// dump describes the DaemonSets and pods, for failure messages.
func (h *harness) dump() string {
	var b strings.Builder
	dss, err := h.client.AppsV1().DaemonSets(testNamespace).List(h.ctx, metav1.ListOptions{})
	if err == nil {
		for _, ds := range dss.Items {
			fmt.Fprintf(&b, "DaemonSet %s uid=%s generation=%d status=%+v\n", ds.Name, ds.UID, ds.Generation, ds.Status)
			for _, r := range h.revisionsOf(&ds) {
				fmt.Fprintf(&b, "  revision %s number=%d\n", r.Name, r.Revision)
			}
		}
	}
	byNode := map[string][]string{}
	for _, pod := range h.allPods() {
		node, _ := daemon.TargetNode(&pod)
		owner := "<orphan>"
		if ref := metav1.GetControllerOf(&pod); ref != nil {
			owner = ref.Name
		}
		byNode[node] = append(byNode[node], fmt.Sprintf("%s(owner=%s hash=%s phase=%s ready=%t bound=%t)",
			pod.Name, owner, pod.Labels[daemon.HashLabel], pod.Status.Phase, daemon.IsReady(&pod), pod.Spec.NodeName != ""))
	}
	nodes := make([]string, 0, len(byNode))
	for n := range byNode {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		fmt.Fprintf(&b, "node %s: %s\n", n, strings.Join(byNode[n], ", "))
	}
	fmt.Fprintf(&b, "injected faults: %v\n", h.api.InjectedFaults())
	return b.String()
}
