package controller

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// The client's limiter lets a pod write whose dispatcher took its token pass at once,
// and makes every other request wait for one of its own.
func TestPrepaidRateLimiter(t *testing.T) {
	if cfg, limiter := PrepaidRateLimiter(&rest.Config{QPS: -1}); limiter != nil || cfg.RateLimiter != nil {
		t.Errorf("no client-side limit: limiter %v, config's %v, want none", limiter, cfg.RateLimiter)
	}
	base := &rest.Config{QPS: 5, Burst: 1}
	cfg, limiter := PrepaidRateLimiter(base)
	if limiter == nil || cfg.RateLimiter == nil || base.RateLimiter != nil {
		t.Fatalf("limiter %v, config's %v, base's %v: want a limiter in a copy of the config", limiter, cfg.RateLimiter, base.RateLimiter)
	}
	if !limiter.TryAccept() {
		t.Fatal("the burst's token was not there")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := cfg.RateLimiter.Wait(withPrepaid(ctx)); err != nil {
		t.Errorf("a prepaid request waited: %v", err)
	}
	if err := cfg.RateLimiter.Wait(ctx); err == nil {
		t.Error("a request without a token passed the emptied limiter within 10ms at 5 QPS")
	}

	own := flowcontrol.NewTokenBucketRateLimiter(1, 1)
	if cfg, limiter := PrepaidRateLimiter(&rest.Config{RateLimiter: own}); limiter != own || cfg.RateLimiter == own {
		t.Error("a config's own limiter: want it returned, and wrapped in the config")
	}
}
