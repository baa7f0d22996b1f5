package dashboard

import (
	"testing"

	"github.com/everynode/everynode/internal/daemon"
)

func TestStreamSendsWhatChanged(t *testing.T) {
	e := explanation(nil, "", report("n1", ""), report("n2", ""))
	grid := func(cells ...Cell) Grid { return Grid{Groups: []Group{{Cells: cells}}} }
	var s stream

	u, send := s.next(e, grid(cells("n1", "n2")...))
	if !send || u.Grid == nil || u.Counts[StateCurrent] != 2 {
		t.Fatalf("first: send %v, %+v; want the whole grid", send, u)
	}
	if u, send = s.next(e, grid(cells("n1", "n2")...)); send {
		t.Errorf("nothing changed, yet %+v was sent", u)
	}
	waiting := Cell{Node: "n2", State: StateWaiting, Why: "paused"}
	u, send = s.next(e, grid(cells("n1")[0], waiting))
	if !send || u.Grid != nil || len(u.Cells) != 1 || u.Cells[0] != waiting || u.Reasons[StateWaiting]["paused"] != 1 {
		t.Errorf("one cell changed: send %v, %+v; want that cell alone", send, u)
	}
	u, send = s.next(e, grid(append(cells("n1"), waiting, Cell{Node: "n3", State: StateUpdating})...))
	if !send || u.Grid == nil {
		t.Errorf("a node joined: send %v, %+v; want the whole grid", send, u)
	}
	// The DaemonSet's status changes, the cells do not: the counters are sent.
	e2 := explanation(nil, "", report("n1", ""))
	e2.DaemonSet.Status.NumberReady = 7
	u, send = s.next(e2, grid(append(cells("n1"), waiting, Cell{Node: "n3", State: StateUpdating})...))
	if !send || u.Grid != nil || len(u.Cells) != 0 || u.Summary.Ready != 7 {
		t.Errorf("the status changed: send %v, %+v; want the new counters and no cell", send, u)
	}
	e2.Report.Problems = []string{"annotation " + daemon.AnnotationPartition + " is not a number"}
	if u, send = s.next(e2, grid(append(cells("n1"), waiting, Cell{Node: "n3", State: StateUpdating})...)); !send || len(u.Problems) != 1 {
		t.Errorf("a problem appeared: send %v, %+v", send, u)
	}
	e2.Report.Unavailable = []daemon.CauseCount{{Unavailable: daemon.Unavailable{Cause: daemon.CauseFailing, Detail: "CrashLoopBackOff"}, Nodes: 2}}
	if u, send = s.next(e2, grid(append(cells("n1"), waiting, Cell{Node: "n3", State: StateUpdating})...)); !send || u.Unavailable != "2 Failing (CrashLoopBackOff)" {
		t.Errorf("pods turned unavailable: send %v, %+v; want their causes counted", send, u)
	}
}
