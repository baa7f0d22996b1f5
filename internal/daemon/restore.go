package daemon

import (
	"fmt"
	"time"

	apps "k8s.io/api/apps/v1"
)

// ReasonRollbackFailed: the revision a rollback restored failed too. The rollout
// holds there rather than roll back again.
const ReasonRollbackFailed Reason = "RollbackFailed"

// restoreMark is what MarkRestored records on a revision a rollback restored.
type restoreMark struct {
	revision int64 // the number the revision takes once restored
	from     int64 // the failed revision it replaced
}

// restoreMarks are the marks a rollback from the current revision (failed) to
// target leaves on target: restored, one above the current one, and no longer
// known to be available everywhere (it rolls out again).
func restoreMarks(current, target *apps.ControllerRevision, at time.Time) []RevisionMark {
	value := fmt.Sprintf("%d from %d at %s", current.Revision+1, current.Revision, at.UTC().Format(time.RFC3339))
	marks := []RevisionMark{{Revision: target, Key: MarkRestored, Value: value}}
	if _, ok := target.Annotations[MarkAvailable]; ok {
		marks = append(marks, RevisionMark{Revision: target, Key: MarkAvailable, Remove: true})
	}
	return marks
}

// readRestoreMark reads a revision's MarkRestored (the time in it is for people).
// Like MarkFailed, a mark counts only while the revision keeps the number it was
// restored under.
func readRestoreMark(r *apps.ControllerRevision) (restoreMark, bool) {
	val, ok := r.Annotations[MarkRestored]
	if !ok {
		return restoreMark{}, false
	}
	var m restoreMark
	if _, err := fmt.Sscanf(val, "%d from %d", &m.revision, &m.from); err != nil || m.revision != r.Revision {
		return restoreMark{}, false
	}
	return m, true
}

// restoring reports whether r is a revision a rollback restored that has not been
// available on every node since: its rollout is watched as a new one's is, and it
// is not rolled back from again.
func restoring(r *apps.ControllerRevision) (restoreMark, bool) {
	m, ok := readRestoreMark(r)
	if !ok {
		return restoreMark{}, false
	}
	if _, released := r.Annotations[MarkAvailable]; released {
		return restoreMark{}, false
	}
	return m, true
}
