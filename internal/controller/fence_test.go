package controller

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestFenceHoldsOnlyWithinTheRenewDeadline(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	f := NewFence(clk, 10*time.Second)
	steps := []struct {
		what string
		do   func()
		held bool
	}{
		{what: "before the Lease is acquired", do: func() {}, held: false},
		{what: "just acquired", do: f.Renewed, held: true},
		{what: "9.9s after the renewal", do: func() { clk.SetTime(clk.Now().Add(9900 * time.Millisecond)) }, held: true},
		{what: "the renew deadline reached (a frozen replica thawed)", do: func() { clk.SetTime(clk.Now().Add(100 * time.Millisecond)) }, held: false},
		{what: "renewed again", do: f.Renewed, held: true},
		{what: "the Lease lost", do: f.Lost, held: false},
	}
	for _, s := range steps {
		s.do()
		if got := f.Held(); got != s.held {
			t.Errorf("%s: Held() = %v, want %v", s.what, got, s.held)
		}
	}
	if !OpenFence().Held() {
		t.Error("an open fence (no leader election) holds back writes")
	}
}

// The fenced client sends no write while the fence does not hold — the server never
// sees it — and lets reads through.
func TestFencedTransportStopsWritesBeforeTheyGoOut(t *testing.T) {
	var writes, reads atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			reads.Add(1)
		} else {
			writes.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"}}`))
	}))
	defer srv.Close()
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	f := NewFence(clk, 10*time.Second)
	client, err := kubernetes.NewForConfig(f.Wrap(&rest.Config{Host: srv.URL}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pods := client.CoreV1().Pods("default")

	err = pods.Delete(ctx, "p", metav1.DeleteOptions{})
	if !errors.Is(err, ErrNotLeading) {
		t.Errorf("delete before the Lease: %v, want ErrNotLeading", err)
	}
	if _, err := pods.Get(ctx, "p", metav1.GetOptions{}); err != nil {
		t.Errorf("a read was held back: %v", err)
	}
	f.Renewed()
	if err := pods.Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete while leading: %v", err)
	}
	clk.SetTime(clk.Now().Add(11 * time.Second))
	if err := pods.Delete(ctx, "p", metav1.DeleteOptions{}); !errors.Is(err, ErrNotLeading) {
		t.Errorf("delete after the renew deadline: %v, want ErrNotLeading", err)
	}
	if writes.Load() != 1 || reads.Load() != 1 {
		t.Errorf("the server saw %d writes and %d reads, want 1 and 1", writes.Load(), reads.Load())
	}
	if f.HeldBack() != 2 {
		t.Errorf("HeldBack = %d, want 2", f.HeldBack())
	}
}

// fakeLock is a resource lock whose writes succeed or fail as told.
type fakeLock struct {
	resourcelock.Interface
	fail bool
}

func (l *fakeLock) Identity() string { return "me" }
func (l *fakeLock) Create(context.Context, resourcelock.LeaderElectionRecord) error {
	return l.err()
}
func (l *fakeLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	return l.err()
}
func (l *fakeLock) err() error {
	if l.fail {
		return errors.New("conflict")
	}
	return nil
}

// The Lease's writes keep the fence: a renewal of our own holds it (timed from when
// it was sent), a failed one does not, a release closes it.
func TestFencedLockRecordsRenewals(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	f := NewFence(clk, 10*time.Second)
	inner := &fakeLock{}
	lock := &fencedLock{Interface: inner, fence: f, clock: clk}
	ctx := context.Background()
	mine := resourcelock.LeaderElectionRecord{HolderIdentity: "me"}

	inner.fail = true
	_ = lock.Update(ctx, mine)
	if f.Held() {
		t.Error("a failed renewal opened the fence")
	}
	inner.fail = false
	if err := lock.Create(ctx, mine); err != nil || !f.Held() {
		t.Errorf("acquired: err %v, held %v", err, f.Held())
	}
	clk.SetTime(clk.Now().Add(8 * time.Second))
	inner.fail = true
	_ = lock.Update(ctx, mine)
	clk.SetTime(clk.Now().Add(3 * time.Second))
	if f.Held() {
		t.Error("held 11s after the last successful renewal")
	}
	inner.fail = false
	_ = lock.Update(ctx, mine)
	if !f.Held() {
		t.Error("a successful renewal did not reopen the fence")
	}
	_ = lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: ""})
	if f.Held() {
		t.Error("still held after releasing the Lease")
	}
}
