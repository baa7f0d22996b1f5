package rolloutplan

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apps "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/everynode/everynode/internal/daemon"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// nodeAgent is the example manifest of docs/rollouts.md (testdata/node-agent.yaml)
// applied to a cluster of twelve nodes in three zones that runs it with an older
// image: zone by zone, eu-west-1a first, five minutes between zones, maxUnavailable
// 2, minReadySeconds 30.
func nodeAgent(t *testing.T) Input {
	data, err := os.ReadFile("testdata/node-agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := ReadManifest(data, "")
	if err != nil {
		t.Fatal(err)
	}
	cur := m.DeepCopy()
	cur.Namespace, cur.UID, cur.Generation = "default", "uid-node-agent", 1
	cur.Spec.Template.Spec.Containers[0].Image = "registry.k8s.io/pause:3.9"
	cur = stored(cur)
	hash := daemon.TemplateHash(&cur.Spec.Template, nil)
	patch, err := daemon.TemplatePatch(&cur.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	rev := &apps.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: "node-agent-" + hash, Namespace: "default", UID: "uid-rev-1",
			Labels:          map[string]string{"app": "node-agent", daemon.HashLabel: hash},
			OwnerReferences: []metav1.OwnerReference{*daemon.ControllerRef(cur)}},
		Data: runtime.RawExtension{Raw: patch}, Revision: 1,
	}
	in := Input{Revisions: []*apps.ControllerRevision{rev}}
	for i := range 12 {
		n := node(fmt.Sprintf("worker-%02d topology.kubernetes.io/zone=eu-west-1%c", i+1, "abc"[i%3]))
		pod := readyPod(cur, hash, n.Name)
		pod.Name, pod.Labels["app"] = "node-agent-"+n.Name, "node-agent"
		in.Nodes, in.Pods = append(in.Nodes, n), append(in.Pods, pod)
	}
	if in.DaemonSet, err = WithManifest(cur, m); err != nil {
		t.Fatal(err)
	}
	return in
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := "testdata/" + name
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

func TestWriteTable(t *testing.T) {
	for _, tc := range []struct {
		file string
		in   Input
	}{
		{"node-agent.txt", nodeAgent(t)},
		{"collapsed.txt", setup(names("sim-node-", 40), budget("", "25%")).input()},
		{"canary.txt", setup([]string{"n01", "n02 canary=true", "n03"}, annotate("canary", "canary=true")).input()},
		{"stable.txt", setup(names("n", 3), annotate("paused", "true", "new-nodes", "stable")).bare("n03").input()},
	} {
		s, err := Plan(tc.in, Options{Start: t0, PodStart: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := s.WriteTable(&out); err != nil {
			t.Fatal(err)
		}
		golden(t, tc.file, out.Bytes())
	}
}

// The JSON form holds the same schedule, and reads back.
func TestWriteJSON(t *testing.T) {
	s, err := Plan(nodeAgent(t), Options{Start: t0, PodStart: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := s.WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	var back Schedule
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, &back, cmp.Transformer("round", func(d Duration) time.Duration {
		return time.Duration(d).Round(time.Millisecond)
	})); diff != "" {
		t.Errorf("read back (-written +read):\n%s", diff)
	}
	var raw struct {
		Steps []struct {
			At    string   `json:"at"`
			Nodes []string `json:"nodes"`
			Waves []string `json:"waves"`
		} `json:"steps"`
		End struct{ State, At string } `json:"end"`
	}
	if err := json.Unmarshal(out.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	if st := raw.Steps[0]; st.At != "0s" || st.Nodes[0] != "worker-01" || st.Waves[0] != "eu-west-1a" || raw.End.State != "complete" {
		t.Errorf("JSON starts with step %+v and ends %+v", st, raw.End)
	}
}

// docs/rollouts.md shows the plans of its example manifest and of a canary as the
// planner prints them.
func TestDocsExample(t *testing.T) {
	docs, err := os.ReadFile("../../docs/rollouts.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"node-agent.yaml", "node-agent.txt", "canary.txt"} {
		want, err := os.ReadFile("testdata/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(docs, want) {
			t.Errorf("docs/rollouts.md does not show testdata/%s as it is", f)
		}
	}
}
