package controller

import (
	"net/http"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
)

// The wire formats --kube-api-content-type accepts. Protobuf is several times cheaper
// to decode than JSON, which matters for the pod and node watches of a large cluster.
const (
	ContentTypeProtobuf = runtime.ContentTypeProtobuf
	ContentTypeJSON     = runtime.ContentTypeJSON
)

// userAgent names everynode in the API server's logs and audit events.
const userAgent = "everynode"

// RESTConfig returns a copy of base with the client rate limit, the wire format,
// compression, the request timeout and the user agent of c.
func (c *Config) RESTConfig(base *rest.Config) *rest.Config {
	cfg := rest.CopyConfig(base)
	cfg.QPS, cfg.Burst = c.QPS, c.Burst
	if c.QPS <= 0 {
		cfg.QPS, cfg.RateLimiter = -1, nil
	}
	cfg.ContentType = c.ContentType
	if c.ContentType == ContentTypeProtobuf {
		// Types without a protobuf encoding fall back to JSON.
		cfg.AcceptContentTypes = ContentTypeProtobuf + "," + ContentTypeJSON
	}
	cfg.DisableCompression = !c.Compression
	if c.RequestTimeout > 0 {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return &requestTimeout{next: rt, timeout: c.RequestTimeout}
		})
	}
	cfg.UserAgent = userAgent
	return cfg
}

// InformerOptions are the options of the informer factory the controller's caches
// come from: the namespace it manages, and objects trimmed before they are cached.
func (c *Config) InformerOptions() []informers.SharedInformerOption {
	opts := []informers.SharedInformerOption{informers.WithTransform(trimForCache)}
	if c.Namespace != "" {
		// Nodes are cluster-scoped and still watched cluster-wide.
		opts = append(opts, informers.WithNamespace(c.Namespace))
	}
	return opts
}

// trimForCache drops managed fields, which no rule reads and which are often the
// largest part of a pod or node, from objects before they enter a cache. Updates sent
// from a trimmed object leave the stored managed fields as they are.
func trimForCache(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
