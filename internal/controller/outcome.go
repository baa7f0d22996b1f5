package controller

import (
	"context"
	"errors"
	"net"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// outcomeUnknown reports whether a write that failed with err may have been carried
// out all the same: its answer was lost (the connection or stream broke, the client
// timed out) or the API server gave up waiting for it (a 504 Timeout). Any other
// answer of the API server means it was not (a ServerTimeout asks for the request
// again); so does an error from before the request was sent: the fence held it
// back, or no connection could be made. Such a write is waited for (createUnknown, deleteUnknown) rather
// than taken as not done, so that a pod created after all is not created twice.
func outcomeUnknown(err error) bool {
	if err == nil || errors.Is(err, ErrNotLeading) || errors.Is(err, context.Canceled) {
		return false
	}
	if _, ok := err.(apierrors.APIStatus); ok || errors.As(err, new(apierrors.APIStatus)) {
		return apierrors.IsTimeout(err)
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false
	}
	return true
}
