package rolloutplan

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// maxListed is how many node names a step lists before it collapses them.
const maxListed = 5

// WriteTable prints the schedule for people: what it assumes, one row per step, and
// how the rollout ends.
func (s *Schedule) WriteTable(w io.Writer) error {
	b := &strings.Builder{}
	fmt.Fprintf(b, "Rollout plan for daemonset %s: %s, %d of %d nodes to update\n", s.DaemonSet, s.revisions(), s.ToUpdate, s.Desired)
	for _, p := range s.Policy {
		fmt.Fprintf(b, "  %s\n", p)
	}
	fmt.Fprintf(b, "This is an estimate: it assumes every new pod is Ready %v after it is created (--pod-start) and then stays healthy, "+
		"and that nothing else changes. Nothing was written to the cluster.\n", time.Duration(s.PodStart))
	for _, n := range s.Notes {
		fmt.Fprintf(b, "Note: %s.\n", n)
	}
	if len(s.Steps) > 0 {
		b.WriteString("\n")
		tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
		header := "STEP\tAT\t"
		if s.WaveKey != "" {
			header += "WAVE\t"
		}
		fmt.Fprintln(tw, header+"NODES\tTHEN WAITS FOR")
		for i, st := range s.Steps {
			row := fmt.Sprintf("%d\t%s\t", i+1, Offset(st.At))
			if s.WaveKey != "" {
				row += waveNames(st.Waves) + "\t"
			}
			fmt.Fprintf(tw, "%s%s\t%s\n", row, st.nodeList(), orDash(thenText(st.Then)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	b.WriteString("\n" + s.End.text(s))
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON prints the schedule as data.
func (s *Schedule) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

func (s *Schedule) revisions() string {
	to := fmt.Sprintf("revision %d", s.ToRevision)
	if len(s.FromRevisions) == 0 {
		return to
	}
	from := make([]string, len(s.FromRevisions))
	for i, r := range s.FromRevisions {
		from[i] = fmt.Sprint(r)
	}
	return fmt.Sprintf("revision %s -> %d", strings.Join(from, ","), s.ToRevision)
}

// text says how the rollout ends, and the estimated duration.
func (e End) text(s *Schedule) string {
	at := Offset(e.At)
	var b strings.Builder
	switch e.State {
	case Complete:
		if e.Desired == 0 {
			b.WriteString("No node should run the DaemonSet's pod: nothing to roll out.\n")
			return b.String()
		}
		if len(s.Steps) == 0 && e.At == 0 {
			fmt.Fprintf(&b, "Nothing to roll out: every node (%d) already runs an available pod of revision %d.\n", e.Desired, s.ToRevision)
			return b.String()
		}
		fmt.Fprintf(&b, "Complete at %s: revision %d available on %d of %d nodes.\n", at, s.ToRevision, e.Updated, e.Desired)
		fmt.Fprintf(&b, "Estimated duration: %s.\n", Offset(e.At)[2:])
		return b.String()
	case Held:
		fmt.Fprintf(&b, "Holds at %s with %d of %d nodes updated: %s: %s\n", at, e.Updated, e.Desired, e.Reason, e.Message)
	case Failed:
		fmt.Fprintf(&b, "Fails at %s with %d of %d nodes updated: %s: %s\n", at, e.Updated, e.Desired, e.Reason, e.Message)
	default:
		fmt.Fprintf(&b, "Plan stopped at %s with %d of %d nodes updated: %s\n", at, e.Updated, e.Desired, e.Message)
	}
	if e.Continue != "" {
		fmt.Fprintf(&b, "To go on: %s\n", e.Continue)
	}
	return b.String()
}

// nodeList names the step's nodes, collapsing a long list to its first and last.
func (st Step) nodeList() string {
	var parts []string
	switch n := len(st.Nodes); {
	case n > maxListed:
		parts = append(parts, fmt.Sprintf("%s … %s (%d nodes)", st.Nodes[0], st.Nodes[n-1], n))
	case n > 0:
		parts = append(parts, strings.Join(st.Nodes, ", "))
	}
	var stable, current []string
	for _, p := range st.Placed {
		if p.Stable {
			stable = append(stable, p.Node)
		} else {
			current = append(current, p.Node)
		}
	}
	if len(current) > 0 {
		parts = append(parts, "first pod on "+collapse(current))
	}
	if len(stable) > 0 {
		parts = append(parts, "stable-revision pod on "+collapse(stable))
	}
	return strings.Join(parts, "; ")
}

func collapse(names []string) string {
	if n := len(names); n > maxListed {
		return fmt.Sprintf("%s … %s (%d nodes)", names[0], names[n-1], n)
	}
	return strings.Join(names, ", ")
}

func thenText(waits []Wait) string {
	msgs := make([]string, len(waits))
	for i, w := range waits {
		msgs[i] = w.Message
	}
	return strings.Join(msgs, ", then ")
}

// waveNames lists waves, the nodes without the waves label as "(unlabelled)".
func waveNames(waves []string) string {
	names := make([]string, len(waves))
	for i, w := range waves {
		names[i] = w
		if w == "" {
			names[i] = "(unlabelled)"
		}
	}
	return orDash(strings.Join(names, ", "))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Offset writes a time since the start of the plan as t+1m35s, to the second.
func Offset(d Duration) string {
	return "t+" + short(time.Duration(d).Round(time.Second))
}
