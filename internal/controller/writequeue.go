package controller

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/everynode/everynode/internal/daemon"
)

// podWrite is one pod create or delete a sync asked for: the one record of it from
// the moment it is queued in the writeQueue until the cache shows it, it fails or it
// lapses (inflight). Exactly one of create and del is set.
type podWrite struct {
	key    string // the DaemonSet's
	ds     *apps.DaemonSet
	rank   WriteRank
	node   string
	logger klog.Logger

	create   *daemon.PodCreate
	template *v1.PodTemplateSpec // what the create's pod is made from
	del      *daemon.PodDelete

	// owner is the part of the queue the write was queued in.
	owner *dsWrites
	// queuedAt numbers the sync that first queued the write (writeQueue.syncs): a
	// create decided again keeps the number of the one it replaces.
	queuedAt uint64
	// until is when the write, once sent, stops being waited for; zero while it is
	// queued. It is the inflight tables' to read and write, under the states' lock.
	until time.Time
}

// writeQueue holds the pod writes of every DaemonSet that wait to go out, and hands
// them to the dispatchers in rank order (WriteRank): the highest level first;
// within a level, DaemonSets in turn, the one served longest ago first; within one
// DaemonSet and level, its deletes first, then its creates, each by the node waiting
// longest, then the write queued first (a create decided again keeps its place), then
// by node name. A node whose pod was asked for long ago thus never waits behind a
// stream of newer writes for nodes whose names sort before its own.
//
// A create for a node without a pod is queued only as its DaemonSet's latest Plan
// asks for it. A sync begins by noting the DaemonSet's queue (begin), before it reads
// the writes in flight; once it knows which nodes it decides again (all of them, or
// those whose objects changed), it takes their queued creates as not in flight
// (decideAgain); its Plan then replaces them (replaceCreates): a queued create the
// Plan asks for again stays queued, in the Plan's version (a new template, a new
// rank), and keeps its place; one it no longer asks for — its node gone or no longer
// eligible, the template changed — is dropped unsent; one sent or dropped since the
// sync began is not queued again, so no node gets a second create. The creates of
// the nodes a sync does not decide again stay queued as they are: what they were
// decided from has not changed. The queued writes go on going out while the sync
// decides. Deletes and surge creates stay as they were queued (decidedAgain).
//
// Creates keep slow start per DaemonSet: the creates of a DaemonSet go out in
// batches of 1, 2, 4, ... pods, a batch only once every create of the one before has
// been answered; a failed create ends the DaemonSet's batches — its other queued
// creates are dropped, and decided again by the sync its failure asks for — and the
// next create starts a batch of 1 again. Batches start over at 1 too once the
// DaemonSet has nothing queued or unanswered. Deletes are not batched.
type writeQueue struct {
	mu   sync.Mutex
	cond *sync.Cond
	byDS map[string]*dsWrites
	// tick counts the writes handed out; a lane records the tick of its last.
	tick uint64
	// syncs counts the calls that queued writes (add, replaceCreates).
	syncs uint64
	// claimants are the dispatchers holding, or waiting for, a rate limiter token;
	// waiting those waiting for a write to claim, and paidWaiting those holding a
	// token and waiting for a write (see wakeLocked).
	claimants, waiting, paidWaiting int
	// urgent counts the requests outside the queue waiting for a token that goes
	// before every queued write (takeToken); handed, the tokens dispatchers handed
	// them and they have not taken yet.
	urgent, handed int
	// handedCond wakes the requests waiting in takeToken (dispatchers wait on cond).
	handedCond *sync.Cond
	// closed ends every dispatcher's wait.
	closed bool
	// syncing holds what the queue notes for each DaemonSet being synced (begin).
	syncing map[string]*syncNote
	// idle, if set, is called, under the queue's lock, with the key of a DaemonSet
	// whose last queued or handed-out write has just been answered.
	idle func(key string)
}

// dsWrites is one DaemonSet's part of the queue.
type dsWrites struct {
	key   string
	lanes []*lane
	// creates indexes the queued creates a sync decides again (decidedAgain) by node.
	creates map[string]*podWrite
	// batch is the size of the current slow-start batch of creates, taken how many
	// of its creates have been handed out, and open how many handed out are not
	// answered yet.
	batch, taken, open int
	// out counts the writes handed out and not answered, deletes too.
	out int
	// errs are the errors of the DaemonSet's writes not yet reported by a sync.
	errs []error
	// failing: the last of its writes answered failed.
	failing bool
}

// lane is a DaemonSet's queued writes of one level.
type lane struct {
	level   WriteRank
	deletes []*podWrite
	creates []*podWrite
	served  uint64
}

// syncNote is what the queue notes of a DaemonSet from the start of its sync (begin)
// until its Plan replaces its queued creates (replaceCreates).
type syncNote struct {
	// all: the sync decides every node again; else only those in nodes.
	all   bool
	nodes map[string]bool
	// left holds the nodes whose queued create left the queue (sent or dropped) since
	// the sync began.
	left map[string]bool
}

func (n *syncNote) covers(node string) bool { return n.all || n.nodes[node] }

func newWriteQueue() *writeQueue {
	q := &writeQueue{byDS: map[string]*dsWrites{}, syncing: map[string]*syncNote{}}
	q.cond = sync.NewCond(&q.mu)
	q.handedCond = sync.NewCond(&q.mu)
	return q
}

func (q *writeQueue) entry(key string) *dsWrites {
	d := q.byDS[key]
	if d == nil {
		d = &dsWrites{key: key, batch: 1, creates: map[string]*podWrite{}}
		q.byDS[key] = d
	}
	return d
}

// decidedAgain reports whether a sync decides the write again while it is queued,
// and replaces it: a create for a node without a pod, which needs no budget. A
// delete or a surge create, which an update budget allows, stays in flight until
// it is sent, as it did when sent at once: a sync decides nothing that budget
// covers until it has gone out and been seen.
func (w *podWrite) decidedAgain() bool {
	return w.create != nil && w.create.Reason != daemon.ReasonSurge
}

// begin notes the start of a sync of the DaemonSet, before it reads its writes in
// flight: from now on the queue records which of its queued creates leave it.
func (q *writeQueue) begin(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.syncing[key] = &syncNote{}
}

// decideAgain tells the queue which nodes the sync decides again (nil: all of them),
// and returns those among them that had a create queued when the sync began: the
// sync decides as if those were not in flight, and replaceCreates settles its Plan
// with them.
func (q *writeQueue) decideAgain(key string, nodes map[string]bool) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	note := q.syncing[key]
	if note == nil {
		return nil // begin was not called: nothing is decided again
	}
	note.all, note.nodes = nodes == nil, nodes
	var out []string
	if d := q.byDS[key]; d != nil {
		if note.all {
			for node := range d.creates {
				out = append(out, node)
			}
		} else {
			for node := range nodes {
				if d.creates[node] != nil {
					out = append(out, node)
				}
			}
		}
	}
	for node := range note.left {
		if note.covers(node) {
			out = append(out, node)
		}
	}
	return out
}

// replaceCreates puts a Plan's creates in the place of the DaemonSet's queued
// creates its sync decided again (decideAgain), and returns those dropped. A create
// for a node whose queued create left the queue since the sync began (sent, or
// dropped) is not queued again. expect is called, under the queue's lock, for each
// create queued, with the create it takes the place of (or nil), before any
// dispatcher can see it.
func (q *writeQueue) replaceCreates(key string, writes []*podWrite, expect func(prev, w *podWrite)) []*podWrite {
	q.mu.Lock()
	defer q.mu.Unlock()
	note := q.syncing[key]
	delete(q.syncing, key)
	if note == nil {
		note = &syncNote{all: true}
	}
	d := q.entry(key)
	q.syncs++
	replaced := map[*podWrite]bool{}
	var keep []*podWrite
	for _, w := range writes {
		w.queuedAt = q.syncs
		var prev *podWrite
		if w.decidedAgain() {
			prev = d.creates[w.node]
			switch {
			case prev != nil:
				w.queuedAt = prev.queuedAt // it takes prev's place
				replaced[prev] = true
			case note.left[w.node]:
				continue
			}
		}
		expect(prev, w)
		keep = append(keep, w)
	}
	// The queued creates decided again and not replaced are dropped. A sync that
	// decided some nodes again looks those up rather than walking the whole queue.
	var dropped []*podWrite
	drop := func(w *podWrite) {
		if w != nil && !replaced[w] {
			dropped = append(dropped, w)
			replaced[w] = true
		}
	}
	if note.all {
		for _, w := range d.creates {
			drop(w)
		}
	} else {
		for node := range note.nodes {
			drop(d.creates[node])
		}
	}
	if len(replaced) > 0 {
		for _, l := range d.lanes {
			l.creates = slices.DeleteFunc(l.creates, func(w *podWrite) bool { return replaced[w] })
		}
		for w := range replaced {
			delete(d.creates, w.node)
		}
	}
	q.addLocked(d, keep)
	q.tidyLocked(d)
	return dropped
}

// add queues writes of the DaemonSet key, calling expect for each first.
func (q *writeQueue) add(key string, writes []*podWrite, expect func(prev, w *podWrite)) {
	if len(writes) == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.syncs++
	for _, w := range writes {
		w.queuedAt = q.syncs
		expect(nil, w)
	}
	q.addLocked(q.entry(key), writes)
}

// addLocked queues writes in their lanes' order. A lane's writes are kept in order:
// the new ones, in order, are merged in.
func (q *writeQueue) addLocked(d *dsWrites, writes []*podWrite) {
	if len(writes) == 0 {
		return
	}
	slices.SortFunc(writes, compareWrites)
	added := map[*lane][]*podWrite{}
	for _, w := range writes {
		w.owner = d
		if w.decidedAgain() {
			d.creates[w.node] = w
		}
		l := d.lane(w.rank)
		added[l] = append(added[l], w)
	}
	for l, ws := range added {
		var creates, deletes []*podWrite
		for _, w := range ws {
			if w.create != nil {
				creates = append(creates, w)
			} else {
				deletes = append(deletes, w)
			}
		}
		l.creates, l.deletes = mergeWrites(l.creates, creates), mergeWrites(l.deletes, deletes)
	}
	q.wakeLocked()
}

// mergeWrites merges b into a, both in order (compareWrites); a's writes go first
// among equals. It may append to a's array (a lane owns its slices).
//
// A sync's new writes are numbered after every queued one (queuedAt), so they usually
// all go last: then they are appended, and a sync costs what it adds, not the length
// of the backlog it joins. Otherwise each new write finds its place by a binary
// search, and the queued writes between two places are copied as a block.
func mergeWrites(a, b []*podWrite) []*podWrite {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 || compareWrites(a[len(a)-1], b[0]) <= 0 {
		return append(a, b...)
	}
	out := make([]*podWrite, 0, len(a)+len(b))
	for _, w := range b {
		i, _ := slices.BinarySearchFunc(a, w, func(q, w *podWrite) int {
			if compareWrites(q, w) <= 0 {
				return -1 // q goes before w, also when they tie
			}
			return 1
		})
		out = append(append(out, a[:i]...), w)
		a = a[i:]
	}
	return append(out, a...)
}

// deleteFirst reports whether lane l of d hands out its first delete rather than its
// first create: the one queued first (compareWrites), the delete when they tie, the
// delete too when d's creates must wait for its batch.
func deleteFirst(l *lane, d *dsWrites) bool {
	switch {
	case len(l.deletes) == 0:
		return false
	case len(l.creates) == 0 || d.taken >= d.batch:
		return true
	}
	return compareWrites(l.creates[0], l.deletes[0]) >= 0
}

// compareWrites orders the writes of one lane: the node that has waited longest,
// then the write queued first, then by node name. Each key is compared only when the
// ones before it tie: the queue compares on every sync that adds writes.
func compareWrites(a, b *podWrite) int {
	if c := a.rank.Since.Compare(b.rank.Since); c != 0 {
		return c
	}
	if c := cmp.Compare(a.queuedAt, b.queuedAt); c != 0 {
		return c
	}
	return strings.Compare(a.node, b.node)
}

func (d *dsWrites) lane(rank WriteRank) *lane {
	for _, l := range d.lanes {
		if CompareLevel(l.level, rank) == 0 {
			return l
		}
	}
	l := &lane{level: WriteRank{Priority: rank.Priority, Gates: rank.Gates, Unblocks: rank.Unblocks}}
	d.lanes = append(d.lanes, l)
	return l
}

// withdraw removes the DaemonSet's queued writes, and returns them. Its slow-start
// batch, its turns and its errors stay.
func (q *writeQueue) withdraw(key string) []*podWrite {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.withdrawLocked(key, true, true)
}

func (q *writeQueue) withdrawLocked(key string, creates, deletes bool) []*podWrite {
	d := q.byDS[key]
	if d == nil {
		return nil
	}
	var out []*podWrite
	for _, l := range d.lanes {
		if creates {
			for _, w := range l.creates {
				q.leftLocked(w)
			}
			out = append(out, l.creates...)
			l.creates = nil
		}
		if deletes {
			out = append(out, l.deletes...)
			l.deletes = nil
		}
	}
	return out
}

// forget drops everything of a DaemonSet that no longer exists, and returns its
// queued writes.
func (q *writeQueue) forget(key string) []*podWrite {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.withdrawLocked(key, true, true)
	delete(q.byDS, key)
	delete(q.syncing, key)
	return out
}

// takeErrors returns, and clears, the errors of the DaemonSet's writes since the
// last call.
func (q *writeQueue) takeErrors(key string) []error {
	q.mu.Lock()
	defer q.mu.Unlock()
	d := q.byDS[key]
	if d == nil {
		return nil
	}
	errs := d.errs
	d.errs = nil
	q.tidyLocked(d)
	return errs
}

// ready counts the writes that could be handed out now.
func (q *writeQueue) readyLocked() int {
	n := 0
	for _, d := range q.byDS {
		creates := 0
		for _, l := range d.lanes {
			n += len(l.deletes)
			creates += len(l.creates)
		}
		n += min(creates, d.batch-d.taken)
	}
	return n
}

// popLocked hands out the first write in order, or nil when none may go now.
func (q *writeQueue) popLocked() *podWrite {
	var (
		best   *lane
		bestDS *dsWrites
	)
	for _, d := range q.byDS {
		creates := d.taken < d.batch
		for _, l := range d.lanes {
			if len(l.deletes) == 0 && (!creates || len(l.creates) == 0) {
				continue
			}
			if best == nil || before(l, d, best, bestDS) {
				best, bestDS = l, d
			}
		}
	}
	if best == nil {
		return nil
	}
	q.tick++
	best.served = q.tick
	bestDS.out++
	var w *podWrite
	if deleteFirst(best, bestDS) {
		w, best.deletes = popFront(best.deletes)
	} else {
		w, best.creates = popFront(best.creates)
		bestDS.taken++
		bestDS.open++
		q.leftLocked(w)
	}
	return w
}

// popFront takes the first write off a lane's slice, clearing its slot: the array
// is appended to again (mergeWrites), and a write handed out must not stay reachable
// from it.
func popFront(ws []*podWrite) (*podWrite, []*podWrite) {
	w := ws[0]
	ws[0] = nil
	return w, ws[1:]
}

// leftLocked notes that a queued create leaves the queue, sent or dropped.
func (q *writeQueue) leftLocked(w *podWrite) {
	if !w.decidedAgain() {
		return
	}
	if d := w.owner; d != nil && d.creates[w.node] == w {
		delete(d.creates, w.node)
	}
	if note := q.syncing[w.key]; note != nil {
		if note.left == nil {
			note.left = map[string]bool{}
		}
		note.left[w.node] = true
	}
}

// before reports whether lane a of DaemonSet da goes before lane b of db: the higher
// level, then the one served longest ago (a DaemonSet's turn), then by key.
func before(a *lane, da *dsWrites, b *lane, db *dsWrites) bool {
	if c := CompareLevel(a.level, b.level); c != 0 {
		return c < 0
	}
	if a.served != b.served {
		return a.served < b.served
	}
	return da.key < db.key
}

// answered settles a write handed out: err is its failure, if it failed; stop ends
// the DaemonSet's batches without an error to report (its namespace is being
// deleted). After a failed or stopped create, the DaemonSet's queued creates are
// dropped and returned.
func (q *writeQueue) answered(w *podWrite, err error, stop bool) []*podWrite {
	q.mu.Lock()
	defer q.mu.Unlock()
	defer q.wakeLocked()
	d := q.byDS[w.key]
	if d == nil || d != w.owner {
		return nil // forgotten meanwhile (the DaemonSet deleted, or idle)
	}
	d.out--
	if err != nil {
		d.errs = append(d.errs, err)
	}
	if err != nil || !stop {
		d.failing = err != nil
	}
	var dropped []*podWrite
	if w.create != nil {
		d.open--
		switch {
		case err != nil || stop:
			dropped = q.withdrawLocked(w.key, true, false)
			d.batch, d.taken = 1, 0
		case d.open == 0 && d.taken >= d.batch:
			d.batch, d.taken = d.batch*2, 0
		}
	}
	q.tidyLocked(d)
	if q.idle != nil && !d.busyLocked() {
		q.idle(w.key)
	}
	return dropped
}

// retrying reports whether the DaemonSet's pod writes are still failing: errors wait
// for a sync to report them, or the last write answered failed and writes the syncs
// since have queued are not all answered yet. A sync that succeeds meanwhile says
// nothing of them, so it must not end the DaemonSet's back-off.
func (q *writeQueue) retrying(key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	d := q.byDS[key]
	return d != nil && (len(d.errs) > 0 || d.failing && d.busyLocked())
}

// busy reports whether the DaemonSet has pod writes queued, or handed out and not
// answered.
func (q *writeQueue) busy(key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	d := q.byDS[key]
	return d != nil && d.busyLocked()
}

func (d *dsWrites) busyLocked() bool {
	if d.out > 0 {
		return true
	}
	for _, l := range d.lanes {
		if len(l.creates)+len(l.deletes) > 0 {
			return true
		}
	}
	return false
}

// tidyLocked resets an idle DaemonSet's batches (nothing queued, nothing handed out
// and unanswered), and drops its entry when it has no errors to report either.
func (q *writeQueue) tidyLocked(d *dsWrites) {
	if d.busyLocked() {
		return
	}
	d.batch, d.taken = 1, 0
	if len(d.errs) == 0 {
		delete(q.byDS, d.key)
	}
}

// close wakes every dispatcher waiting in next, for good.
func (q *writeQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.handedCond.Broadcast()
	q.mu.Unlock()
}

// len is how many writes are queued.
func (q *writeQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, d := range q.byDS {
		for _, l := range d.lanes {
			n += len(l.creates) + len(l.deletes)
		}
	}
	return n
}
