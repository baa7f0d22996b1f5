package controller

import "sort"

// maxChangeLog is how many changes a changeLog keeps; a reader further behind is
// told to compare everything.
const maxChangeLog = 1 << 14

// changeLog remembers which keys of a set of objects changed, each change numbered by
// a counter that only grows (the caller's, which may count other sets too), so that a
// reader can ask which keys changed after a number it saw. It keeps the last
// changes only: every change numbered above base (zero until it first drops some).
type changeLog[K comparable] struct {
	base    uint64
	entries []change[K]
}

type change[K comparable] struct {
	seq uint64
	key K
}

// add records that key changed, as change number seq (above any before).
func (l *changeLog[K]) add(seq uint64, key K) {
	l.entries = append(l.entries, change[K]{seq: seq, key: key})
	if len(l.entries) > maxChangeLog {
		half := len(l.entries) / 2
		l.base = l.entries[half-1].seq
		l.entries = append([]change[K](nil), l.entries[half:]...)
	}
}

// since calls fn for every key changed after change number from (a key may come more
// than once), or reports false when the log no longer holds them all.
func (l *changeLog[K]) since(from uint64, fn func(K)) bool {
	if from < l.base {
		return false
	}
	i := sort.Search(len(l.entries), func(i int) bool { return l.entries[i].seq > from })
	for _, c := range l.entries[i:] {
		fn(c.key)
	}
	return true
}
