package inspect

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/everynode/everynode/internal/daemon"
)

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
	if u := n.Unavailable; u != nil {
		fmt.Fprintf(tw, "Unavailable:\t%s\n", u)
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
	if len(r.Unavailable) > 0 {
		fmt.Fprintf(w, "Unavailable: %s\n", daemon.FormatCauses(r.Unavailable))
	}
	if r.Companion {
		fmt.Fprintf(w, "Update: everynode deletes old pods within %s=%s; the DaemonSet controller that places pods recreates them\n",
			daemon.AnnotationMaxUnavailable, e.DaemonSet.Annotations[daemon.AnnotationMaxUnavailable])
	}
	switch c := r.Progressing; {
	case c != nil:
		fmt.Fprintf(w, "Progressing: %s/%s: %s (since %s)\n", c.Status, c.Reason, c.Message, c.LastTransitionTime.UTC().Format(time.RFC3339))
	case !e.Report.Policy.Set:
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
