package dashboard

import (
	"reflect"

	"github.com/everynode/everynode/internal/daemon"
	"github.com/everynode/everynode/internal/inspect"
)

// Update is one message of a DaemonSet's stream: the whole grid when its layout
// changed (the first message, a node added, removed or moved to another group),
// else only the cells whose state changed.
type Update struct {
	Summary Summary `json:"summary"`
	// Revision is the current template's revision number (0 before it is recorded).
	Revision int64    `json:"revision,omitempty"`
	Problems []string `json:"problems,omitempty"`
	// Unavailable counts the nodes without an available pod by cause, on one line
	// ("2 NodeNotReady, 1 Failing (CrashLoopBackOff)"; "" for none).
	Unavailable string `json:"unavailable,omitempty"`
	// Counts are the cells of each state; Reasons, of each state, the cells of each
	// Why.
	Counts  map[State]int            `json:"counts"`
	Reasons map[State]map[string]int `json:"reasons,omitempty"`
	Grid    *Grid                    `json:"grid,omitempty"`
	Cells   []Cell                   `json:"cells,omitempty"`
}

// stream turns successive grids of one DaemonSet into Updates.
type stream struct {
	last     *Grid
	lastHead Update // the last update sent, without its cells
}

// next is the update from the last one sent to e and its grid g, and false when
// nothing changed.
func (s *stream) next(e *inspect.Explanation, g Grid) (Update, bool) {
	u := Update{Summary: SummaryOf(e.DaemonSet), Revision: e.Report.Revision, Problems: e.Report.Problems,
		Unavailable: daemon.FormatCauses(e.Report.Unavailable), Counts: map[State]int{}, Reasons: map[State]map[string]int{}}
	for _, grp := range g.Groups {
		for _, c := range grp.Cells {
			u.Counts[c.State]++
			if c.Why == "" {
				continue
			}
			if u.Reasons[c.State] == nil {
				u.Reasons[c.State] = map[string]int{}
			}
			u.Reasons[c.State][c.Why]++
		}
	}
	changed, same := changedCells(s.last, g)
	send := !same || len(changed) > 0 || !reflect.DeepEqual(u, s.lastHead)
	if !same {
		u.Grid = &g
	} else {
		u.Cells = changed
	}
	s.last, s.lastHead = &g, u
	s.lastHead.Grid, s.lastHead.Cells = nil, nil
	return u, send
}

// changedCells are the cells of next that differ from prev's, when both have the
// same groups of the same nodes in the same order (same is false otherwise).
func changedCells(prev *Grid, next Grid) (changed []Cell, same bool) {
	if prev == nil || prev.GroupBy != next.GroupBy || len(prev.Groups) != len(next.Groups) {
		return nil, false
	}
	for i, g := range next.Groups {
		p := prev.Groups[i]
		if p.Name != g.Name || len(p.Cells) != len(g.Cells) {
			return nil, false
		}
		for j, c := range g.Cells {
			if p.Cells[j].Node != c.Node {
				return nil, false
			}
			if p.Cells[j] != c {
				changed = append(changed, c)
			}
		}
	}
	return changed, true
}
