package controller

import (
	"bytes"
	"sync"
	"sync/atomic"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// foreignWrites notices, in full mode, another controller writing to the DaemonSets
// everynode manages — typically kube-controller-manager's DaemonSet controller left
// on — from the field managers the API server records on every write: a pod a
// DaemonSet controls created by another manager, or a DaemonSet's status written by
// another manager. Only writes seen as they happen count (after the caches synced):
// pods and status left behind by a controller that has been turned off, as in a
// takeover, do not.
//
// The cache transform (observe) reads the managed fields before they are trimmed;
// the event handlers then tell new writes from old ones.
type foreignWrites struct {
	self  string      // everynode's own field manager
	armed atomic.Bool // the caches have synced: events from now on are new writes

	mu sync.Mutex
	// creators holds, until their add event, the pods DaemonSets control that another
	// manager created.
	creators map[types.UID]string
	// marks is, per DaemonSet, the newest status write by another manager; seen is
	// the one the event handlers last saw.
	marks, seen map[types.UID]statusMark
	// contested are the DaemonSets another controller writes to, by key.
	contested map[string]foreignWrite
	// everyone, when its Manager is set, contests every DaemonSet: another
	// controller answered the probe (see probeOtherController).
	everyone foreignWrite
}

// statusMark is a status write by a field manager.
type statusMark struct {
	manager string
	at      time.Time
}

// foreignWrite is what showed another controller at work on a DaemonSet.
type foreignWrite struct {
	Manager string // its field manager
	What    string // what it wrote, for people
	// Reported: the condition, event and log line have gone out.
	Reported bool
}

func newForeignWrites(self string) *foreignWrites {
	return &foreignWrites{self: self, creators: map[types.UID]string{}, marks: map[types.UID]statusMark{},
		seen: map[types.UID]statusMark{}, contested: map[string]foreignWrite{}}
}

// observe reads what it needs from an object's managed fields, before the cache
// transform drops them.
func (f *foreignWrites) observe(obj any) {
	switch o := obj.(type) {
	case *v1.Pod:
		ref := metav1.GetControllerOfNoCopy(o)
		if ref == nil || ref.Kind != "DaemonSet" {
			return
		}
		if creator := creatorOf(o.ManagedFields); creator != "" && creator != f.self {
			f.mu.Lock()
			f.creators[o.UID] = creator
			f.mu.Unlock()
		}
	case *apps.DaemonSet:
		var newest statusMark
		for _, e := range o.ManagedFields {
			if wroteStatus(e) && e.Manager != f.self && e.Time != nil && e.Time.After(newest.at) {
				newest = statusMark{manager: e.Manager, at: e.Time.Time}
			}
		}
		if newest.manager != "" {
			f.mu.Lock()
			f.marks[o.UID] = newest
			f.mu.Unlock()
		}
	}
}

// wroteStatus reports whether a managed fields entry is a status write: one through
// the status subresource, or (as client-go's fake API records them) one that owns
// status fields.
func wroteStatus(e metav1.ManagedFieldsEntry) bool {
	return e.Subresource == "status" || (e.Subresource == "" && e.FieldsV1 != nil && bytes.Contains(e.FieldsV1.Raw, []byte(`"f:status"`)))
}

// creatorOf is the field manager that created an object: the one that set its
// ownerReferences in the main resource.
func creatorOf(entries []metav1.ManagedFieldsEntry) string {
	for _, e := range entries {
		if e.Subresource == "" && e.Operation == metav1.ManagedFieldsOperationUpdate && e.FieldsV1 != nil &&
			bytes.Contains(e.FieldsV1.Raw, []byte(`"f:ownerReferences"`)) {
			return e.Manager
		}
	}
	return ""
}

// arm starts counting: every event from now on is a write as it happens.
func (f *foreignWrites) arm() { f.armed.Store(true) }

// podAdded is told of a pod the DaemonSet of key controls; it reports whether another
// manager created it just now.
func (f *foreignWrites) podAdded(key string, pod *v1.Pod) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	creator, ok := f.creators[pod.UID]
	delete(f.creators, pod.UID)
	if !ok || !f.armed.Load() {
		return false
	}
	f.contest(key, creator, "created pod "+pod.Name)
	return true
}

// podGone forgets a pod that was updated or deleted: only its add can show another
// controller creating it.
func (f *foreignWrites) podGone(uid types.UID) {
	f.mu.Lock()
	delete(f.creators, uid)
	f.mu.Unlock()
}

// daemonSetSeen is told of each add or update of the DaemonSet of key; it reports
// whether another manager has written its status since the last one.
func (f *foreignWrites) daemonSetSeen(key string, ds *apps.DaemonSet) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	mark := f.marks[ds.UID]
	prev, had := f.seen[ds.UID]
	f.seen[ds.UID] = mark
	if !had || mark == prev || mark.manager == "" || !f.armed.Load() {
		return false
	}
	f.contest(key, mark.manager, "wrote its status")
	return true
}

// daemonSetGone forgets a deleted DaemonSet.
func (f *foreignWrites) daemonSetGone(key string, uid types.UID) {
	f.mu.Lock()
	delete(f.marks, uid)
	delete(f.seen, uid)
	delete(f.contested, key)
	f.mu.Unlock()
}

// contest records the first foreign write seen on the DaemonSet of key; f.mu is held.
func (f *foreignWrites) contest(key, manager, what string) {
	if _, ok := f.contested[key]; !ok {
		f.contested[key] = foreignWrite{Manager: manager, What: what}
	}
}

// contestAll records that another controller is at work on every DaemonSet.
func (f *foreignWrites) contestAll(manager, what string) {
	f.mu.Lock()
	f.everyone = foreignWrite{Manager: manager, What: what}
	f.mu.Unlock()
}

// contestedBy returns what showed another controller at work on the DaemonSet of
// key, if anything did.
func (f *foreignWrites) contestedBy(key string) (foreignWrite, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, ok := f.contested[key]
	if !ok && f.everyone.Manager != "" {
		w, ok = f.everyone, true
		f.contested[key] = w
	}
	return w, ok
}

// reported notes that the contest of key has been reported.
func (f *foreignWrites) reported(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if w, ok := f.contested[key]; ok {
		w.Reported = true
		f.contested[key] = w
	}
}
