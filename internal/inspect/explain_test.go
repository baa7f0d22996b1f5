package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/everynode/everynode/internal/daemon"
)

// tableRows maps each node of a printed table to its row's columns (split on runs of
// two spaces), and returns the lines after the table.
func tableRows(t *testing.T, out string) (map[string][]string, []string) {
	t.Helper()
	table, summary, _ := strings.Cut(out, "\n\n")
	rows := map[string][]string{}
	for i, line := range strings.Split(table, "\n") {
		var cols []string
		for _, c := range strings.Split(line, "  ") {
			if c = strings.TrimSpace(c); c != "" {
				cols = append(cols, c)
			}
		}
		if i == 0 {
			rows["HEADER"] = cols
			continue
		}
		rows[cols[0]] = cols
	}
	return rows, strings.Split(strings.TrimSpace(summary), "\n")
}

func TestExplainTable(t *testing.T) {
	client, _ := wavesCluster(t)
	e, err := Explain(context.Background(), client, ns, "agent", t0)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := e.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	rows, summary := tableRows(t, b.String())
	want := map[string][]string{
		"HEADER":  {"NODE", "WAVE", "RUN", "REASON", "POD", "REVISION", "UPDATED", "READY", "AVAILABLE", "DETAIL"},
		"node-a1": {"node-a1", "a", "yes", "Eligible", "agent-a1", "1 (" + e.Report.Nodes[0].Pods[0].Hash + ")", "no", "yes", "yes", "waiting for an earlier wave to finish (rollout.everynode.dev/waves)"},
		"node-b1": {"node-b1", "b", "yes", "Eligible", "agent-b1", "2 (" + e.Report.Hash + ")", "yes", "yes", "yes", "-"},
		"node-b2": {"node-b2", "b", "yes", "Eligible", "agent-b2", "2 (" + e.Report.Hash + ")", "yes", "no", "no", "waiting for its new pod to become available"},
	}
	for node, cols := range want {
		if strings.Join(rows[node], "|") != strings.Join(cols, "|") {
			t.Errorf("row %s:\n got %q\nwant %q\n%s", node, rows[node], cols, b.String())
		}
	}
	x := rows["node-x"]
	if len(x) != 10 || x[2] != "no" || x[3] != string(daemon.ReasonNodeSelectorMismatch) || x[4] != "-" ||
		!strings.Contains(x[9], "node node-x does not match the pod's nodeSelector") {
		t.Errorf("row node-x = %q", x)
	}
	if len(summary) != 3 ||
		summary[0] != "daemonset/agent: current revision 2 (hash "+e.Report.Hash+"); 3 nodes should run it, 2 run the current revision, 1 of them available" ||
		summary[1] != "Unavailable: 1 Starting" ||
		summary[2] != "Progressing: True/RollingOut: rolling out revision 2 (since 2030-01-01T11:50:00Z)" {
		t.Errorf("summary:\n%s", strings.Join(summary, "\n"))
	}
}

func TestExplainNode(t *testing.T) {
	client, _ := wavesCluster(t)
	e, err := Explain(context.Background(), client, ns, "agent", t0)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := e.WriteNode(&b, "node-a1"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Node:         node-a1\n",
		"Wave:         zone=a\n",
		"Should run:   yes (Eligible): node node-a1 satisfies",
		"Pods:         agent-a1: revision 1 (" + e.Report.Nodes[0].Pods[0].Hash + "), older template, Running, ready, available\n",
		"Waiting for:  an earlier wave to finish (rollout.everynode.dev/waves) [LaterWave]\n",
		"daemonset/agent: current revision 2",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in:\n%s", want, b.String())
		}
	}
	if err := e.WriteNode(&b, "node-zz"); err == nil || !strings.Contains(err.Error(), `node "node-zz" does not exist`) {
		t.Errorf("unknown node: err = %v", err)
	}
}

func TestExplainJSON(t *testing.T) {
	client, _ := wavesCluster(t)
	e, err := Explain(context.Background(), client, ns, "agent", t0)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := e.WriteJSON(&b, ""); err != nil {
		t.Fatal(err)
	}
	var got JSON
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v in:\n%s", err, b.String())
	}
	if got.Revision != 2 || got.WaveKey != "zone" || got.Progressing == nil || got.Progressing.Reason != "RollingOut" || len(got.Nodes) != 4 {
		t.Fatalf("got %+v", got)
	}
	a1 := got.Nodes[0]
	if a1.Node != "node-a1" || !a1.Run || a1.Waiting != string(daemon.ReasonLaterWave) || len(a1.Pods) != 1 ||
		a1.Pods[0].Revision != 1 || a1.Pods[0].Updated || !a1.Pods[0].Available {
		t.Errorf("node-a1 = %+v", a1)
	}
	x := got.Nodes[3]
	if x.Node != "node-x" || x.Run || x.Reason != string(daemon.ReasonNodeSelectorMismatch) || x.Message == "" || len(x.Pods) != 0 {
		t.Errorf("node-x = %+v", x)
	}

	b.Reset()
	if err := e.WriteJSON(&b, "node-b2"); err != nil {
		t.Fatal(err)
	}
	got = JSON{}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Nodes) != 1 || got.Nodes[0].Node != "node-b2" || got.Nodes[0].Waiting != string(daemon.ReasonNewPodUnavailable) {
		t.Errorf("node-b2 only: %+v", got.Nodes)
	}
}

// A node whose old pod is terminating while its new one starts gets a row per pod;
// what the next sync does there is in the detail.
func TestExplainSeveralPodsAndNextSync(t *testing.T) {
	ds := newDS("agent", nil)
	rev1, h1 := revision(t, ds, 1)
	ds.Spec.Template.Spec.Containers[0].Image = "img:v2"
	rev2, h2 := revision(t, ds, 2)
	old := newPod(ds, "agent-old", h1, "node-1", true)
	old.DeletionTimestamp = &metav1.Time{Time: t0}
	client := fake.NewClientset(ds, rev1, rev2, newNode("node-1", "role", "worker"), newNode("node-2", "role", "worker"),
		old, newPod(ds, "agent-new", h2, "node-1", false))
	e, err := Explain(context.Background(), client, ns, "agent", t0)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := e.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if !strings.HasPrefix(lines[0], "NODE ") || strings.Contains(lines[0], "WAVE") {
		t.Errorf("header %q: no WAVE column without waves", lines[0])
	}
	if !strings.HasPrefix(lines[1], "node-1 ") || !strings.Contains(lines[1], "agent-new") ||
		!strings.HasPrefix(lines[2], "   ") || !strings.Contains(lines[2], "agent-old (terminating)") || !strings.Contains(lines[2], "1 ("+h1+")") {
		t.Errorf("node-1 should take a row per pod:\n%s", b.String())
	}
	if !strings.HasPrefix(lines[3], "node-2 ") || !strings.Contains(lines[3], "next: create a pod of the current revision (MissingPod)") {
		t.Errorf("node-2 should say what the next sync does:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "Progressing: no condition (the DaemonSet has no rollout.everynode.dev/ annotations)") {
		t.Errorf("summary should say why there is no condition:\n%s", b.String())
	}
}

// An invalid rollout annotation is reported in the summary, with the held nodes.
func TestExplainInvalidAnnotation(t *testing.T) {
	ds := newDS("agent", map[string]string{daemon.AnnotationPartition: "lots"})
	rev1, h1 := revision(t, ds, 1)
	ds.Spec.Template.Spec.Containers[0].Image = "img:v2"
	rev2, _ := revision(t, ds, 2)
	client := fake.NewClientset(ds, rev1, rev2, newNode("node-1", "role", "worker"), newPod(ds, "agent-1", h1, "node-1", true))
	e, err := Explain(context.Background(), client, ns, "agent", t0)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := e.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"waiting for a rollout annotation to be fixed",
		"Progressing: False/InvalidAnnotation: annotation rollout.everynode.dev/partition=\"lots\"",
		"Invalid: annotation rollout.everynode.dev/partition=\"lots\"",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if e.Report.Progressing.Status != v1.ConditionFalse {
		t.Errorf("condition %+v", e.Report.Progressing)
	}
}

func TestExplainNotFound(t *testing.T) {
	client, _ := wavesCluster(t)
	_, err := Explain(context.Background(), client, "other", "agent", t0)
	if err == nil || err.Error() != `DaemonSet "agent" not found in namespace "other": pass -n NAMESPACE, or list them with `+"`everynode kubectl get daemonsets -A`" {
		t.Errorf("err = %v", err)
	}
}
