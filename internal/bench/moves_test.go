package bench

import (
	"math"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func TestMoveAnswered(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	life := func(seen, gone int) podLife {
		l := podLife{seen: at(seen)}
		if gone >= 0 {
			l.gone = at(gone)
		}
		return l
	}
	const move = 1000
	tests := []struct {
		name         string
		until        time.Time
		gained, lost [][]podLife
		want         int // ms; -1: not answered
	}{
		{name: "answered by the last of the creates and deletes",
			gained: [][]podLife{{life(1100, -1)}, {life(1300, -1)}},
			lost:   [][]podLife{{life(0, 1200)}, {life(0, 1050)}}, want: 1300},
		{name: "a delete not yet seen: not answered",
			gained: [][]podLife{{life(1100, -1)}}, lost: [][]podLife{{life(0, -1)}}, want: -1},
		{name: "a create not yet seen: not answered",
			gained: [][]podLife{{}}, lost: [][]podLife{{life(0, 1100)}}, want: -1},
		{name: "a pod of the new pool gone before the move does not answer it",
			gained: [][]podLife{{life(0, 500)}}, lost: nil, want: -1},
		{name: "a pod of the new pool there already answers at once",
			gained: [][]podLife{{life(0, -1)}}, lost: nil, want: move},
		{name: "pods of the old pool gone before the move are not waited for",
			gained: [][]podLife{{life(1100, -1)}}, lost: [][]podLife{{life(0, 500), life(600, 1150)}}, want: 1150},
		{name: "an old pool's pod made again after the move must go too",
			gained: [][]podLife{{life(1100, -1)}}, lost: [][]podLife{{life(0, 1050), life(1200, -1)}}, want: -1},
		{name: "an answer after the node's next move does not count", until: at(1500),
			gained: [][]podLife{{life(1600, -1)}}, lost: [][]podLife{{life(0, 1100)}}, want: -1},
		{name: "pods made after the next move are that move's", until: at(1500),
			gained: [][]podLife{{life(1100, -1)}}, lost: [][]podLife{{life(0, 1200), life(1600, -1)}}, want: 1200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := moveAnswered(at(move), tc.until, tc.gained, tc.lost)
			switch {
			case tc.want < 0 && ok:
				t.Errorf("answered at %v, want not answered", got.Sub(t0))
			case tc.want >= 0 && (!ok || !got.Equal(at(tc.want))):
				t.Errorf("answered at %v (%v), want %v", got.Sub(t0), ok, at(tc.want).Sub(t0))
			}
		})
	}
}

// Moves never answered rank last, as ∞: with one of four unanswered, p50 is
// measured and p99 is ∞; none dropped.
func TestMoveLatenciesCountUnansweredMoves(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lives := newPodLives()
	ds := func(name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{Kind: "DaemonSet", Name: name, UID: types.UID(name), Controller: ptr.To(true)}}
	}
	pod := func(uid, node, owner string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), OwnerReferences: ds(owner)}, Spec: v1.PodSpec{NodeName: node}}
	}
	var moves []poolMove
	for i, node := range []string{"n0", "n1", "n2", "n3"} {
		old := pod("old-"+node, node, "pool-a")
		lives.see(old, t0, false)
		moves = append(moves, poolMove{node: node, from: "a", to: "b", at: t0.Add(time.Second)})
		if i == 3 {
			continue // n3's move is never answered
		}
		answer := t0.Add(time.Second + time.Duration(i+1)*100*time.Millisecond)
		lives.see(pod("new-"+node, node, "pool-b"), answer, false)
		lives.see(old, answer, true)
	}
	pools := func(pool string) []string { return []string{"pool-" + pool} }
	lat := moveLatencies(moves, pools, lives.of)
	if lat.missing != 1 || len(lat.reached) != 3 {
		t.Fatalf("%d answered, %d missing; want 3 and 1", len(lat.reached), lat.missing)
	}
	if got := lat.seconds(50); math.Abs(got-0.2) > 1e-9 {
		t.Errorf("p50 = %v s, want 0.2", got)
	}
	if got := lat.seconds(99); !math.IsInf(got, 1) {
		t.Errorf("p99 = %v, want ∞ (the unanswered move)", got)
	}
}

func TestPodLivesRecordsTheFirstSightAndGoing(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lives := newPodLives()
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1", OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: "d", Controller: ptr.To(true)}}},
		Spec: v1.PodSpec{NodeName: "n"}}
	lives.see(p, t0, false)
	lives.see(p, t0.Add(time.Second), false) // an update
	terminating := p.DeepCopy()
	terminating.DeletionTimestamp = &metav1.Time{Time: t0}
	lives.see(terminating, t0.Add(2*time.Second), false)
	lives.see(terminating, t0.Add(3*time.Second), true) // the delete event
	got := lives.of("n", "d")
	if len(got) != 1 || !got[0].seen.Equal(t0) || !got[0].gone.Equal(t0.Add(2*time.Second)) {
		t.Errorf("lives %+v, want one seen at t0 and going at t0+2s", got)
	}
	lives.see(&v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u2"}, Spec: v1.PodSpec{NodeName: "n"}}, t0, false)
	if got := lives.of("n", ""); len(got) != 0 {
		t.Errorf("a pod no DaemonSet controls was recorded: %+v", got)
	}
}
