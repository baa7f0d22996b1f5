package inspect

import (
	"encoding/json"
	"io"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/everynode/everynode/internal/daemon"
)

// JSON is an Explanation for machines: node is "" for every node.
type JSON struct {
	Namespace   string                   `json:"namespace"`
	DaemonSet   string                   `json:"daemonSet"`
	Revision    int64                    `json:"revision,omitempty"`
	Hash        string                   `json:"hash"`
	WaveKey     string                   `json:"waveKey,omitempty"`
	Progressing *apps.DaemonSetCondition `json:"progressing,omitempty"`
	Problems    []string                 `json:"problems,omitempty"`
	// Settled: the next sync would neither create nor delete a pod.
	Settled bool           `json:"settled"`
	Events  []daemon.Event `json:"events,omitempty"`
	Nodes   []JSONNode     `json:"nodes"`
	// Unavailable counts the nodes without an available pod by cause.
	Unavailable []JSONCause `json:"unavailable,omitempty"`
}

// JSONCause is why some nodes have no available pod.
type JSONCause struct {
	Cause  string `json:"cause"`
	Detail string `json:"detail,omitempty"`
	Nodes  int    `json:"nodes,omitempty"`
}

// JSONNode is one node's report.
type JSONNode struct {
	Node        string       `json:"node"`
	Wave        string       `json:"wave,omitempty"`
	Run         bool         `json:"run"`
	KeepRunning bool         `json:"keepRunning"`
	Reason      string       `json:"reason"`
	Message     string       `json:"message"`
	Pods        []JSONPod    `json:"pods"`
	Waiting     string       `json:"waiting,omitempty"`
	WaitMessage string       `json:"waitMessage,omitempty"`
	Until       *metav1.Time `json:"until,omitempty"`
	// FailedPods counts the DaemonSet's failed pods on the node, when one is there.
	FailedPods int      `json:"failedPods,omitempty"`
	Next       []string `json:"next,omitempty"`
	// Unavailable: why the node has no available pod, when it should run one.
	Unavailable *JSONCause `json:"unavailable,omitempty"`
}

// JSONPod is one of the DaemonSet's pods on a node.
type JSONPod struct {
	Name      string      `json:"name"`
	Hash      string      `json:"hash"`
	Revision  int64       `json:"revision,omitempty"`
	Updated   bool        `json:"updated"`
	Phase     v1.PodPhase `json:"phase"`
	Ready     bool        `json:"ready"`
	Available bool        `json:"available"`
	Deleting  bool        `json:"deleting"`
}

// WriteJSON prints the explanation (of one node, when node is set) as JSON.
func (e *Explanation) WriteJSON(w io.Writer, node string) error {
	r := e.Report
	out := JSON{Namespace: e.DaemonSet.Namespace, DaemonSet: e.DaemonSet.Name, Revision: r.Revision, Hash: r.Hash,
		WaveKey: e.WaveKey, Progressing: r.Progressing, Problems: r.Problems, Settled: r.Settled, Events: r.Events,
		Nodes: []JSONNode{}}
	for _, c := range r.Unavailable {
		out.Unavailable = append(out.Unavailable, JSONCause{Cause: string(c.Cause), Detail: c.Detail, Nodes: c.Nodes})
	}
	nodes := r.Nodes
	if node != "" {
		n, err := e.Node(node)
		if err != nil {
			return err
		}
		nodes = []daemon.NodeReport{n}
	}
	for _, n := range nodes {
		jn := JSONNode{Node: n.Node, Wave: n.Wave, Run: n.Verdict.Run, KeepRunning: n.Verdict.KeepRunning,
			Reason: string(n.Verdict.Reason), Message: n.Verdict.Message(), Pods: []JSONPod{},
			Waiting: string(n.Waiting), WaitMessage: n.WaitMessage(), FailedPods: n.Failures, Next: n.Next}
		if !n.Until.IsZero() {
			jn.Until = &metav1.Time{Time: n.Until}
		}
		if u := n.Unavailable; u != nil {
			jn.Unavailable = &JSONCause{Cause: string(u.Cause), Detail: u.Detail}
		}
		for _, p := range n.Pods {
			jn.Pods = append(jn.Pods, JSONPod{Name: p.Name, Hash: p.Hash, Revision: e.Revisions[p.Hash], Updated: p.Updated,
				Phase: p.Phase, Ready: p.Ready, Available: p.Available, Deleting: p.Deleting})
		}
		out.Nodes = append(out.Nodes, jn)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
