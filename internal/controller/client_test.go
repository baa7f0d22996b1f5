package controller

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

func TestRESTConfig(t *testing.T) {
	base := &rest.Config{Host: "https://example.com", QPS: 5, Burst: 10}
	cfg := DefaultConfig()
	got := cfg.RESTConfig(base)
	if got.QPS != 20 || got.Burst != 30 || got.ContentType != ContentTypeProtobuf ||
		got.AcceptContentTypes != "application/vnd.kubernetes.protobuf,application/json" || got.UserAgent != "everynode" ||
		!got.DisableCompression {
		t.Errorf("defaults: qps %v burst %d content %q accept %q agent %q", got.QPS, got.Burst, got.ContentType, got.AcceptContentTypes, got.UserAgent)
	}
	if base.QPS != 5 || base.ContentType != "" {
		t.Errorf("the base config was modified: %+v", base)
	}
	cfg.QPS, cfg.ContentType, cfg.Compression = 0, ContentTypeJSON, true
	got = cfg.RESTConfig(base)
	if got.QPS >= 0 || got.RateLimiter != nil || got.ContentType != ContentTypeJSON || got.AcceptContentTypes != "" || got.DisableCompression {
		t.Errorf("unlimited JSON: qps %v limiter %v content %q accept %q", got.QPS, got.RateLimiter, got.ContentType, got.AcceptContentTypes)
	}
}

func TestTrimForCache(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"app": "agent"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}}}
	out, err := trimForCache(pod)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*v1.Pod)
	if got.ManagedFields != nil || got.Labels["app"] != "agent" || got.Name != "p" {
		t.Errorf("trimmed pod = %+v, want it without managed fields and otherwise whole", got.ObjectMeta)
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "default/p", Obj: pod}
	if out, err := trimForCache(tomb); err != nil || out.(cache.DeletedFinalStateUnknown).Key != "default/p" {
		t.Errorf("a tombstone passes through unchanged: %v, %v", out, err)
	}
}
