package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestOutcomeUnknown(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	post := func(err error) error { return &url.Error{Op: "Post", URL: "https://apiserver/api/v1/pods", Err: err} }
	for _, tc := range []struct {
		name    string
		err     error
		unknown bool
	}{
		{"the stream reset after the request went out", post(errors.New("stream error: stream ID 7; INTERNAL_ERROR; received from peer")), true},
		{"the client's timeout", post(context.DeadlineExceeded), true},
		{"the connection closed mid-answer", post(errors.New("unexpected EOF")), true},
		{"the API server gave up waiting (504)", fmt.Errorf("creating pod: %w", apierrors.NewTimeoutError("etcd", 1)), true},
		{"a 500", apierrors.NewInternalError(errors.New("storage")), false},
		{"a ServerTimeout, asking for the request again", apierrors.NewServerTimeout(pods, "create", 1), false},
		{"throttled", apierrors.NewTooManyRequests("later", 1), false},
		{"a conflict", apierrors.NewConflict(pods, "p", errors.New("modified")), false},
		{"refused by admission", fmt.Errorf("creating pod: %w", apierrors.NewForbidden(pods, "p", errors.New("quota"))), false},
		{"held back by the fence", post(ErrNotLeading), false},
		{"no connection", post(&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}), false},
		{"the controller stopping", post(context.Canceled), false},
		{"no error", nil, false},
	} {
		if got := outcomeUnknown(tc.err); got != tc.unknown {
			t.Errorf("%s (%v): outcomeUnknown = %t, want %t", tc.name, tc.err, got, tc.unknown)
		}
	}
}
