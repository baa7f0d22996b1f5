package controller

import (
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/kubernetes"
)

// Guard wraps a handler so that only those allowed reach it.
type Guard func(http.Handler) http.Handler

// authBackoff is how the reviews are retried when the API server does not answer.
var authBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// DelegatedAuth is the Guard of /metrics and /debug/pprof/ in a cluster, as
// kube-controller-manager guards its secure port: the request's bearer token is
// authenticated by the API server (a TokenReview), and the user it names must be
// allowed to get the request's path there (a SubjectAccessReview on the non-resource
// URL, such as the one a ClusterRole with nonResourceURLs ["/metrics"] grants).
// Answers are cached briefly. No token: 401; not allowed: 403.
func DelegatedAuth(client kubernetes.Interface) (Guard, error) {
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		TokenAccessReviewClient:  client.AuthenticationV1(),
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      &authBackoff,
		CacheTTL:                 time.Minute,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("setting up the metrics endpoint's authentication: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: client.AuthorizationV1(),
		AllowCacheTTL:             10 * time.Second,
		DenyCacheTTL:              10 * time.Second,
		WebhookRetryBackoff:       &authBackoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("setting up the metrics endpoint's authorization: %w", err)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			resp, ok, err := authn.AuthenticateRequest(r)
			if err != nil || !ok {
				http.Error(w, "Unauthorized: send a bearer token the API server accepts", http.StatusUnauthorized)
				return
			}
			attrs := authorizer.AttributesRecord{User: resp.User, Verb: "get", Path: r.URL.Path}
			decision, reason, err := authz.Authorize(r.Context(), attrs)
			if err != nil || decision != authorizer.DecisionAllow {
				msg := fmt.Sprintf("Forbidden: user %q may not get %s", resp.User.GetName(), r.URL.Path)
				if reason != "" {
					msg += ": " + reason
				}
				http.Error(w, msg, http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r)
		})
	}, nil
}
