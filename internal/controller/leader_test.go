package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"
)

func TestRunLeadingRunsWhileHoldingTheLeaseAndReleasesIt(t *testing.T) {
	client := fake.NewClientset()
	cfg := LeaderConfig{Namespace: "kube-system", Name: "everynode", LeaseDuration: 3 * time.Second,
		RenewDeadline: 2 * time.Second, RetryPeriod: 100 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ran := make(chan struct{})
	errDone := errors.New("work finished")
	fence := NewFence(clock.RealClock{}, cfg.RenewDeadline)
	err := RunLeading(ctx, client, cfg, fence, func(ctx context.Context) error {
		if !fence.Held() {
			t.Error("running with the fence closed")
		}
		lease, err := client.CoordinationV1().Leases("kube-system").Get(ctx, "everynode", metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			t.Errorf("running without a held Lease: %v %+v", err, lease)
		}
		close(ran)
		return errDone
	})
	if !errors.Is(err, errDone) {
		t.Fatalf("RunLeading = %v, want the run's own error", err)
	}
	select {
	case <-ran:
	default:
		t.Fatal("run was never called")
	}
	lease, err := client.CoordinationV1().Leases("kube-system").Get(context.Background(), "everynode", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("Lease still held by %q after the run ended; want it released", *h)
	}
	if fence.Held() {
		t.Error("the fence holds after the Lease was released")
	}
}
