package controller

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// A request that nothing answers is given up after --kube-api-timeout, with an error
// whose outcome is unknown; a watch that stays open longer is not cut, and an
// answer read after RoundTrip returns is read whole.
func TestRequestTimeout(t *testing.T) {
	release := make(chan struct{})
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost: // held: nobody answers
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case isWatch(r):
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			time.Sleep(300 * time.Millisecond) // longer than the timeout
			w.Write([]byte(`{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","resourceVersion":"2"}}}` + "\n"))
		default:
			w.Write([]byte(`{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`))
		}
	}))
	defer api.Close()
	defer close(release)

	cfg := DefaultConfig()
	cfg.RequestTimeout, cfg.ContentType = 100*time.Millisecond, ContentTypeJSON
	client, err := kubernetes.NewForConfig(cfg.RESTConfig(&rest.Config{Host: api.URL}))
	if err != nil {
		t.Fatal(err)
	}
	pods := client.CoreV1().Pods("ns")
	_, err = pods.Create(context.Background(), newPodForTimeout(), metav1.CreateOptions{})
	if !errors.Is(err, context.DeadlineExceeded) || !outcomeUnknown(err) {
		t.Errorf("a create nothing answers: %v, want the deadline, with an unknown outcome", err)
	}
	if _, err := pods.List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Errorf("a list answered at once: %v", err)
	}
	w, err := pods.Watch(context.Background(), metav1.ListOptions{ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if ev := <-w.ResultChan(); ev.Type != "ADDED" {
		t.Errorf("a watch whose first event comes after the timeout: %v %v, want the ADDED event", ev.Type, ev.Object)
	}
}

func newPodForTimeout() *v1.Pod { return &v1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "p-"}} }
