package dashboard

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	"github.com/everynode/everynode/internal/inspect"
)

//go:embed web
var web embed.FS

// ActionHeader must be set on the requests that change a DaemonSet. A page of
// another site cannot send it without the server's consent (a CORS preflight the
// dashboard never grants), so it cannot steer rollouts through the user's browser.
const ActionHeader = "X-Everynode-Dashboard"

// Options tune the server.
type Options struct {
	// Refresh is the least time between two messages of one event stream.
	Refresh time.Duration
	// LoopbackOnly refuses requests whose Host is not localhost or a loopback
	// address (DNS rebinding), for a server that listens on loopback.
	LoopbackOnly bool
	// Now is the clock of the explanations (time.Now when nil).
	Now func() time.Time
}

// Server is the dashboard's HTTP handler.
type Server struct {
	cache  *Cache
	client kubernetes.Interface
	opts   Options
	mux    *http.ServeMux
}

// NewServer serves the page, its event streams and its actions from c, and sends
// the actions to the cluster with client.
func NewServer(c *Cache, client kubernetes.Interface, o Options) *Server {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Refresh <= 0 {
		o.Refresh = 250 * time.Millisecond
	}
	s := &Server{cache: c, client: client, opts: o, mux: http.NewServeMux()}
	static, err := fs.Sub(web, "web")
	if err != nil {
		panic(err) // the embedded tree always has web/
	}
	s.mux.Handle("GET /", http.FileServerFS(static))
	s.mux.HandleFunc("GET /api/daemonsets", s.daemonSets)
	s.mux.HandleFunc("GET /api/daemonsets/{namespace}/{name}/grid", s.grid)
	s.mux.HandleFunc("GET /api/daemonsets/{namespace}/{name}/nodes/{node}", s.node)
	s.mux.HandleFunc("POST /api/daemonsets/{namespace}/{name}/{action}", s.action)
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.opts.LoopbackOnly && !loopbackHost(r.Host) {
		http.Error(w, "this dashboard answers only to localhost or a loopback address", http.StatusForbidden)
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
	s.mux.ServeHTTP(w, r)
}

func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// daemonSets streams the list of DaemonSets, whole at each change.
func (s *Server) daemonSets(w http.ResponseWriter, r *http.Request) {
	es := newEventStream(w)
	var last []byte
	follow(r.Context(), s.cache, s.opts.Refresh, es, func() error {
		list, err := s.cache.DaemonSets()
		if err != nil {
			return es.send("failure", err.Error())
		}
		b, err := json.Marshal(list)
		if err != nil || bytes.Equal(b, last) {
			return err
		}
		last = b
		return es.send("daemonsets", json.RawMessage(b))
	})
}

// grid streams one DaemonSet's grid: whole first, then the cells that change.
func (s *Server) grid(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	es := newEventStream(w)
	var st stream
	gone := false
	follow(r.Context(), s.cache, s.opts.Refresh, es, func() error {
		e, nodes, err := s.cache.Explain(ns, name, s.opts.Now())
		switch {
		case apierrors.IsNotFound(err):
			if gone {
				return nil
			}
			gone, st = true, stream{}
			return es.send("gone", "daemonset "+ns+"/"+name+" does not exist")
		case err != nil:
			return es.send("failure", err.Error())
		}
		gone = false
		if u, changed := st.next(e, GridOf(e, nodes)); changed {
			return es.send("update", u)
		}
		return nil
	})
}

// node answers with one node's explanation, as `everynode explain DS NODE` prints it.
func (s *Server) node(w http.ResponseWriter, r *http.Request) {
	e, _, err := s.cache.Explain(r.PathValue("namespace"), r.PathValue("name"), s.opts.Now())
	if err != nil {
		httpError(w, err)
		return
	}
	var b bytes.Buffer
	if err := e.WriteNode(&b, r.PathValue("node")); err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

// actions are the rollout verbs the page's buttons send, as `everynode rollout`
// runs them.
var actions = map[string]func(ctx context.Context, client kubernetes.Interface, ns, name string) (string, error){
	"pause":   inspect.Pause,
	"resume":  inspect.Resume,
	"promote": inspect.Promote,
	"undo": func(ctx context.Context, client kubernetes.Interface, ns, name string) (string, error) {
		return inspect.Undo(ctx, client, ns, name, 0)
	},
}

// action runs a rollout verb and answers with its message as JSON.
func (s *Server) action(w http.ResponseWriter, r *http.Request) {
	do, ok := actions[r.PathValue("action")]
	if !ok {
		http.Error(w, "unknown action "+r.PathValue("action")+": use pause, resume, promote or undo", http.StatusNotFound)
		return
	}
	if r.Header.Get(ActionHeader) == "" {
		http.Error(w, "a rollout action needs the "+ActionHeader+" header: send it from the dashboard's page", http.StatusForbidden)
		return
	}
	if origin := r.Header.Get("Origin"); origin != "" && origin != "http://"+r.Host {
		http.Error(w, "a rollout action must come from the dashboard's own page, not "+origin, http.StatusForbidden)
		return
	}
	msg, err := do(r.Context(), s.client, r.PathValue("namespace"), r.PathValue("name"))
	if err != nil {
		httpError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
}

// httpError answers with err's message and the API server's status code, when the
// error came from it.
func httpError(w http.ResponseWriter, err error) {
	code := http.StatusBadRequest
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code != 0 {
		code = int(status.Status().Code)
	}
	http.Error(w, err.Error(), code)
}
