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
	revision int64     // the number the revision takes once restored
	from     int64     // the failed revision it replaced
	at       time.Time // when the rollback was made
}

// restoreMarkValue is the mark a rollback from the current revision (failed) to
// target leaves on target. Restoring it makes target the newest revision, one
// above the current one.
func restoreMarkValue(current *apps.ControllerRevision, at time.Time) string {
	return fmt.Sprintf("%d from %d at %s", current.Revision+1, current.Revision, at.UTC().Format(time.RFC3339))
}

// readRestoreMark reads a revision's MarkRestored. Like MarkFailed, a mark counts
// only while the revision keeps the number it was restored under.
func readRestoreMark(r *apps.ControllerRevision) (restoreMark, bool) {
	val, ok := r.Annotations[MarkRestored]
	if !ok {
		return restoreMark{}, false
	}
	var m restoreMark
	var at string
	if _, err := fmt.Sscanf(val, "%d from %d at %s", &m.revision, &m.from, &at); err != nil || m.revision != r.Revision {
		return restoreMark{}, false
	}
	t, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return restoreMark{}, false
	}
	m.at = t
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
	if at, err := time.Parse(time.RFC3339, r.Annotations[MarkAvailable]); err == nil && !at.Before(m.at) {
		return restoreMark{}, false
	}
	return m, true
}
