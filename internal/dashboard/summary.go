package dashboard

import (
	"cmp"
	"slices"

	apps "k8s.io/api/apps/v1"

	"github.com/everynode/everynode/internal/daemon"
)

// Summary is a DaemonSet's row in the list: its status counters, as kubectl shows
// them, and its Progressing condition.
type Summary struct {
	Namespace    string `json:"namespace"`
	Name         string `json:"name"`
	Strategy     string `json:"strategy"`
	Desired      int32  `json:"desired"`
	Current      int32  `json:"current"`
	Ready        int32  `json:"ready"`
	Updated      int32  `json:"updated"`
	Available    int32  `json:"available"`
	Unavailable  int32  `json:"unavailable"`
	Misscheduled int32  `json:"misscheduled"`
	// Paused: rollout.everynode.dev/paused is "true".
	Paused bool `json:"paused"`
	// Progressing is the condition's status, reason and message ("" when the
	// DaemonSet has none).
	Progressing        string `json:"progressing,omitempty"`
	ProgressingReason  string `json:"progressingReason,omitempty"`
	ProgressingMessage string `json:"progressingMessage,omitempty"`
}

// SummaryOf is one DaemonSet's row.
func SummaryOf(ds *apps.DaemonSet) Summary {
	st := ds.Status
	s := Summary{Namespace: ds.Namespace, Name: ds.Name, Strategy: string(ds.Spec.UpdateStrategy.Type),
		Desired: st.DesiredNumberScheduled, Current: st.CurrentNumberScheduled, Ready: st.NumberReady,
		Updated: st.UpdatedNumberScheduled, Available: st.NumberAvailable, Unavailable: st.NumberUnavailable,
		Misscheduled: st.NumberMisscheduled, Paused: daemon.PolicyOf(ds).Paused}
	if c := daemon.Progressing(&st); c != nil {
		s.Progressing, s.ProgressingReason, s.ProgressingMessage = string(c.Status), c.Reason, c.Message
	}
	return s
}

// Summaries are the rows of list, sorted by namespace and name.
func Summaries(list []*apps.DaemonSet) []Summary {
	out := make([]Summary, 0, len(list))
	for _, ds := range list {
		out = append(out, SummaryOf(ds))
	}
	slices.SortFunc(out, func(a, b Summary) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}
