package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/everynode/everynode/internal/daemon"
)

// Explanation is daemon.Explain's report on one DaemonSet, with what it takes to
// show it to people.
type Explanation struct {
	DaemonSet *apps.DaemonSet
	Report    daemon.Report
	// Revisions maps the hash of each revision the DaemonSet controls to its number.
	Revisions map[string]int64
	// WaveKey is the node label of the waves ("" when the rollout has none).
	WaveKey string
	Now     time.Time
}

// Gather reads what the controller would look at for ds: every node, the pods and
// the ControllerRevisions of its namespace. The controller's in-flight writes and
// failed-pod back-offs are not visible from outside it, so they are left empty.
func Gather(ctx context.Context, client kubernetes.Interface, ds *apps.DaemonSet, now time.Time) (*daemon.Snapshot, error) {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", apiError(err, ds.Namespace, ds.Name))
	}
	pods, err := client.CoreV1().Pods(ds.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", apiError(err, ds.Namespace, ds.Name))
	}
	revs, err := client.AppsV1().ControllerRevisions(ds.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing controller revisions: %w", apiError(err, ds.Namespace, ds.Name))
	}
	s := &daemon.Snapshot{DaemonSet: ds, Now: now}
	for i := range nodes.Items {
		s.Nodes = append(s.Nodes, &nodes.Items[i])
	}
	for i := range pods.Items {
		s.Pods = append(s.Pods, &pods.Items[i])
	}
	for i := range revs.Items {
		s.Revisions = append(s.Revisions, &revs.Items[i])
	}
	return s, nil
}

// Explain reads DaemonSet ns/name and what it depends on, and explains it.
func Explain(ctx context.Context, client kubernetes.Interface, ns, name string, now time.Time) (*Explanation, error) {
	ds, err := getDaemonSet(ctx, client, ns, name)
	if err != nil {
		return nil, err
	}
	s, err := Gather(ctx, client, ds, now)
	if err != nil {
		return nil, err
	}
	return explainSnapshot(s), nil
}

func explainSnapshot(s *daemon.Snapshot) *Explanation {
	e := &Explanation{DaemonSet: s.DaemonSet, Report: daemon.Explain(s), Revisions: map[string]int64{}, Now: s.Now,
		WaveKey: daemon.ParsePolicy(s.DaemonSet.Annotations).WaveKey}
	for _, r := range s.Revisions {
		if h := r.Labels[daemon.HashLabel]; h != "" && metav1.IsControlledBy(r, s.DaemonSet) {
			e.Revisions[h] = r.Revision
		}
	}
	return e
}

// Node returns the report on one node.
func (e *Explanation) Node(name string) (daemon.NodeReport, error) {
	for _, n := range e.Report.Nodes {
		if n.Node == name {
			return n, nil
		}
	}
	return daemon.NodeReport{}, fmt.Errorf("node %q does not exist and runs no pod of daemonset/%s: list the nodes with `everynode kubectl get nodes`", name, e.DaemonSet.Name)
}

// WriteTable prints one row per node (a further row for each further pod on it), then
// the summary.
func (e *Explanation) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := []string{"NODE", "RUN", "REASON", "POD", "REVISION", "UPDATED", "READY", "AVAILABLE", "DETAIL"}
	if e.WaveKey != "" {
		head = slices.Insert(head, 1, "WAVE")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, n := range e.Report.Nodes {
		pods := n.Pods
		if len(pods) == 0 {
			pods = []daemon.PodReport{{}}
		}
		for i, p := range pods {
			row := []string{"", "", "", "", "", "", "", "", ""}
			if i == 0 {
				row[0], row[1], row[2], row[8] = n.Node, runWord(n.Verdict), string(n.Verdict.Reason), e.detail(n)
			}
			if p.Name == "" {
				row[3], row[4], row[5], row[6], row[7] = "-", "-", "-", "-", "-"
			} else {
				name := p.Name
				if p.Deleting {
					name += " (terminating)"
				}
				row[3], row[4], row[5], row[6], row[7] = name, e.revision(p.Hash), yesNo(p.Updated), yesNo(p.Ready), yesNo(p.Available)
			}
			if e.WaveKey != "" {
				wave := ""
				if i == 0 {
					wave = waveName(n.Wave)
				}
				row = slices.Insert(row, 1, wave)
			}
			fmt.Fprintln(tw, strings.TrimRight(strings.Join(row, "\t"), "\t"))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return e.writeSummary(w)
}

// WriteNode prints everything known about one node.
func (e *Explanation) WriteNode(w io.Writer, node string) error {
	n, err := e.Node(node)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Node:\t%s\n", n.Node)
	if e.WaveKey != "" {
		fmt.Fprintf(tw, "Wave:\t%s=%s\n", e.WaveKey, waveName(n.Wave))
	}
	run := "yes"
	switch {
	case !n.Verdict.Run && n.Verdict.KeepRunning:
		run = "no new pod, but a running pod may stay"
	case !n.Verdict.Run:
		run = "no"
	}
	fmt.Fprintf(tw, "Should run:\t%s (%s): %s\n", run, n.Verdict.Reason, n.Verdict.Message())
	if len(n.Pods) == 0 {
		fmt.Fprintf(tw, "Pods:\tnone\n")
	}
	for i, p := range n.Pods {
		label := ""
		if i == 0 {
			label = "Pods:"
		}
		state := []string{"revision " + e.revision(p.Hash), either(p.Updated, "current template", "older template"),
			string(p.Phase), either(p.Ready, "ready", "not ready"), either(p.Available, "available", "not available")}
		if p.Deleting {
			state = append(state, "terminating")
		}
		fmt.Fprintf(tw, "%s\t%s: %s\n", label, p.Name, strings.Join(state, ", "))
	}
	if n.Waiting == "" {
		fmt.Fprintf(tw, "Waiting for:\tnothing\n")
	} else {
		fmt.Fprintf(tw, "Waiting for:\t%s [%s]%s\n", n.WaitMessage(), n.Waiting, e.until(n.Until))
	}
	for i, next := range n.Next {
		label := ""
		if i == 0 {
			label = "Next sync:"
		}
		fmt.Fprintf(tw, "%s\t%s\n", label, next)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return e.writeSummary(w)
}

// writeSummary prints the DaemonSet's current revision, its node counts, the
// Progressing condition and whatever stops the controller.
func (e *Explanation) writeSummary(w io.Writer) error {
	r := e.Report
	rev := "not recorded yet"
	if r.Revision > 0 {
		rev = fmt.Sprint(r.Revision)
	}
	total := Count(r)
	fmt.Fprintf(w, "daemonset/%s: current revision %s (hash %s); %d nodes should run it, %d run the current revision, %d of them available\n",
		e.DaemonSet.Name, rev, r.Hash, total.Nodes, total.Updated, total.Available)
	switch c := r.Progressing; {
	case c != nil:
		fmt.Fprintf(w, "Progressing: %s/%s: %s (since %s)\n", c.Status, c.Reason, c.Message, c.LastTransitionTime.UTC().Format(time.RFC3339))
	case !daemon.ParsePolicy(e.DaemonSet.Annotations).Set:
		fmt.Fprintf(w, "Progressing: no condition (the DaemonSet has no %s annotations)\n", daemon.RolloutPrefix)
	default:
		fmt.Fprintln(w, "Progressing: no condition yet")
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "Invalid: %s\n", p)
	}
	for _, ev := range r.Events {
		fmt.Fprintf(w, "Event (%s) %s: %s\n", ev.Type, ev.Reason, ev.Message)
	}
	return nil
}

// detail is the table's last column: why the node gets no pod, what it waits for,
// what the next sync does there.
func (e *Explanation) detail(n daemon.NodeReport) string {
	var parts []string
	if !n.Verdict.Run {
		parts = append(parts, n.Verdict.Message())
	}
	if n.Waiting != "" {
		parts = append(parts, "waiting for "+n.WaitMessage()+e.until(n.Until))
	}
	if len(n.Next) > 0 {
		parts = append(parts, "next: "+strings.Join(n.Next, ", "))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}

func (e *Explanation) until(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return fmt.Sprintf(" until %s (in %s)", t.UTC().Format(time.RFC3339), t.Sub(e.Now).Round(time.Second))
}

// revision names a pod's revision: its number, where a revision of the DaemonSet
// has that hash, and the hash.
func (e *Explanation) revision(hash string) string {
	if hash == "" {
		return "unknown"
	}
	if n, ok := e.Revisions[hash]; ok {
		return fmt.Sprintf("%d (%s)", n, hash)
	}
	return hash
}

func runWord(v daemon.Verdict) string {
	switch {
	case v.Run:
		return "yes"
	case v.KeepRunning:
		return "keep"
	}
	return "no"
}

func yesNo(b bool) string { return either(b, "yes", "no") }

func either(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}

func waveName(w string) string {
	if w == "" {
		return "(unlabelled)"
	}
	return w
}

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
	Next        []string     `json:"next,omitempty"`
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
			Waiting: string(n.Waiting), WaitMessage: n.WaitMessage(), Next: n.Next}
		if !n.Until.IsZero() {
			jn.Until = &metav1.Time{Time: n.Until}
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

// Counts are nodes that should run the DaemonSet's pod, and how many of them run a
// pod of the current revision, and an available one.
type Counts struct {
	Wave                      string // the wave's label value, for Waves
	Nodes, Updated, Available int
}

// Count totals the nodes of a report.
func Count(r daemon.Report) Counts {
	var c Counts
	for _, n := range r.Nodes {
		c.add(n)
	}
	return c
}

func (c *Counts) add(n daemon.NodeReport) {
	if !n.Verdict.Run {
		return
	}
	c.Nodes++
	updated, available := false, false
	for _, p := range n.Pods {
		if p.Updated && !p.Deleting {
			updated = true
			available = available || p.Available
		}
	}
	if updated {
		c.Updated++
	}
	if available {
		c.Available++
	}
}

// Waves counts the nodes of each wave, in the order the rollout takes them: the
// values of wave-order first, then the others sorted, then the nodes without the
// label.
func Waves(r daemon.Report, pol daemon.Policy) []Counts {
	byWave := map[string]*Counts{}
	for _, n := range r.Nodes {
		if !n.Verdict.Run {
			continue
		}
		c := byWave[n.Wave]
		if c == nil {
			c = &Counts{Wave: n.Wave}
			byWave[n.Wave] = c
		}
		c.add(n)
	}
	var out []Counts
	for _, w := range pol.WaveOrder {
		if c := byWave[w]; c != nil {
			out = append(out, *c)
			delete(byWave, w)
		}
	}
	var rest []string
	for w := range byWave {
		if w != "" {
			rest = append(rest, w)
		}
	}
	slices.Sort(rest)
	for _, w := range rest {
		out = append(out, *byWave[w])
	}
	if c := byWave[""]; c != nil {
		out = append(out, *c)
	}
	return out
}
