package controller

// sharedSet is a set of objects read as one slice that readers share: a change is
// kept pending, and the next read applies the changes pending to a copy, so a read
// costs a pass over the set only when something changed, and a reader's slice never
// changes under it. The caller locks.
type sharedSet[K comparable, V comparable] struct {
	items   []V // as of the last read; never written in once read
	pos     map[K]int
	pending map[K]V // changes since: the object now, the zero V when gone
	key     func(V) K
}

func newSharedSet[K comparable, V comparable](key func(V) K) sharedSet[K, V] {
	return sharedSet[K, V]{pos: map[K]int{}, pending: map[K]V{}, key: key}
}

// set records v as the object under k now; the zero V records that it is gone.
func (s *sharedSet[K, V]) set(k K, v V) { s.pending[k] = v }

// read returns the objects with every change applied; callers must not modify it.
func (s *sharedSet[K, V]) read() []V {
	if len(s.pending) == 0 {
		return s.items
	}
	var gone V
	next := make([]V, len(s.items), len(s.items)+len(s.pending))
	copy(next, s.items)
	for k, v := range s.pending {
		i, held := s.pos[k]
		switch {
		case held && v != gone:
			next[i] = v
		case held: // the last one takes its place
			last := len(next) - 1
			next[i] = next[last]
			s.pos[s.key(next[i])] = i
			next = next[:last]
			delete(s.pos, k)
		case v != gone:
			s.pos[k] = len(next)
			next = append(next, v)
		}
	}
	clear(s.pending)
	s.items = next
	return next
}

// now is the object under k with every change applied, or the zero V; it copies
// nothing.
func (s *sharedSet[K, V]) now(k K) V {
	if v, ok := s.pending[k]; ok {
		return v
	}
	if i, ok := s.pos[k]; ok {
		return s.items[i]
	}
	var none V
	return none
}
