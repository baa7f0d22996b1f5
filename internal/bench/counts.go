package bench

import (
	"net/http"
	"sort"
	"strings"
)

// Verbs, in the order tables show them. They are the API server's own verbs except
// that a GET of one object is "get", of a collection "list", and a GET with
// watch=true (or under /watch/) "watch".
var Verbs = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}

// Key is what a request is counted under.
type Key struct {
	Verb string
	// Resource is the resource, with its subresource after a slash (pods,
	// daemonsets/status, pods/binding), or for a path outside the resource API the
	// path itself (/version, /apis, /healthz).
	Resource string
}

// Tally is what was counted under one Key.
type Tally struct {
	Requests int64
	// Errors are the requests answered with a status of 400 or more (conflicts
	// included).
	Errors int64
	// Bytes is the size of the response bodies as sent to the client (compressed if
	// the client asked for gzip), watch streams included as they flow.
	Bytes int64
}

func (t Tally) add(o Tally) Tally {
	return Tally{Requests: t.Requests + o.Requests, Errors: t.Errors + o.Errors, Bytes: t.Bytes + o.Bytes}
}

func (t Tally) sub(o Tally) Tally {
	return Tally{Requests: t.Requests - o.Requests, Errors: t.Errors - o.Errors, Bytes: t.Bytes - o.Bytes}
}

// Counts are the requests through a Proxy, by verb and resource.
type Counts map[Key]Tally

// Sub is what was counted in c and not yet in earlier: the requests between two
// snapshots.
func (c Counts) Sub(earlier Counts) Counts {
	out := Counts{}
	for k, t := range c {
		if d := t.sub(earlier[k]); d != (Tally{}) {
			out[k] = d
		}
	}
	return out
}

// Verb sums the tallies of one verb over every resource.
func (c Counts) Verb(verb string) Tally {
	var sum Tally
	for k, t := range c {
		if k.Verb == verb {
			sum = sum.add(t)
		}
	}
	return sum
}

// Total sums every tally.
func (c Counts) Total() Tally {
	var sum Tally
	for _, t := range c {
		sum = sum.add(t)
	}
	return sum
}

// Get is the tally of one verb on one resource.
func (c Counts) Get(verb, resource string) Tally { return c[Key{verb, resource}] }

// Keys are the keys counted, by verb in the order of Verbs, then resource.
func (c Counts) Keys() []Key {
	rank := map[string]int{}
	for i, v := range Verbs {
		rank[v] = i
	}
	keys := make([]Key, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		ri, iok := rank[keys[i].Verb]
		rj, jok := rank[keys[j].Verb]
		if !iok {
			ri = len(Verbs)
		}
		if !jok {
			rj = len(Verbs)
		}
		if ri != rj {
			return ri < rj
		}
		if keys[i].Verb != keys[j].Verb {
			return keys[i].Verb < keys[j].Verb
		}
		return keys[i].Resource < keys[j].Resource
	})
	return keys
}

// Classify names the verb and resource of a request to the Kubernetes API.
func Classify(r *http.Request) Key {
	path := strings.Trim(r.URL.Path, "/")
	parts := strings.Split(path, "/")
	var rest []string // the parts after the group version
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:] // api/v1/...
	case len(parts) >= 3 && parts[0] == "apis":
		rest = parts[3:] // apis/group/version/...
	default:
		return Key{Verb: nonResourceVerb(r.Method), Resource: "/" + path}
	}
	if len(rest) == 0 {
		// Discovery of one group version.
		return Key{Verb: nonResourceVerb(r.Method), Resource: "/" + path}
	}
	watch := false
	if rest[0] == "watch" {
		watch, rest = true, rest[1:]
	}
	if len(rest) >= 3 && rest[0] == "namespaces" && !(len(rest) == 3 && (rest[2] == "status" || rest[2] == "finalize")) {
		// namespaces/<ns>/<resource>...; namespaces/<name> and its status and
		// finalize are the namespace itself.
		rest = rest[2:]
	}
	if len(rest) == 0 {
		return Key{Verb: nonResourceVerb(r.Method), Resource: "/" + path}
	}
	resource := rest[0]
	named := len(rest) >= 2
	if len(rest) >= 3 {
		resource += "/" + rest[2]
	}
	if v := r.URL.Query().Get("watch"); v == "true" || v == "1" {
		watch = true
	}
	var verb string
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case watch:
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		if named {
			verb = "delete"
		} else {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(r.Method)
	}
	return Key{Verb: verb, Resource: resource}
}

func nonResourceVerb(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return strings.ToLower(method)
}

// StatusWrites are the DaemonSet status writes counted: updates and patches of
// daemonsets/status.
func (c Counts) StatusWrites() int64 {
	return c.Get("update", "daemonsets/status").Requests + c.Get("patch", "daemonsets/status").Requests
}
