package controller

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"
)

// chartFiles holds the install chart's Grafana dashboard and alerts.
var chartFiles = filepath.Join("..", "..", "charts", "everynode", "files")

var metricName = regexp.MustCompile(`\beverynode_[a-z_]+\b`)

// recorder is a Registerer that keeps the names of the metrics registered with it.
type recorder struct{ names map[string]bool }

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *recorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 16)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			// With the series a histogram adds.
			for _, s := range []string{"", "_bucket", "_sum", "_count"} {
				r.names[m[1]+s] = true
			}
		}
	}
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = r.Register(c)
	}
}

func (r *recorder) Unregister(prometheus.Collector) bool { return false }

// served are the names of the metrics everynode serves.
func served() map[string]bool {
	r := &recorder{names: map[string]bool{}}
	NewMetrics(r).WithFence(NewFence(clock.RealClock{}, time.Second))
	return r.names
}

// exprs collects every "expr" string in a decoded JSON or YAML document.
func exprs(v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && (k == "expr" || k == "query" || k == "definition") {
				*out = append(*out, s)
			}
			exprs(e, out)
		}
	case []any:
		for _, e := range x {
			exprs(e, out)
		}
	}
}

// TestDashboardAndAlertsNameServedMetrics parses the dashboard and the alerts and
// checks that every everynode metric their queries name is one everynode serves.
func TestDashboardAndAlertsNameServedMetrics(t *testing.T) {
	names := served()
	if !names["everynode_pods_created_total"] || !names["everynode_sync_duration_seconds_bucket"] {
		t.Fatalf("the served metrics were not all found: %v", names)
	}

	var docs []any
	raw, err := os.ReadFile(filepath.Join(chartFiles, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dashboard any
	if err := json.Unmarshal(raw, &dashboard); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	docs = append(docs, dashboard)
	raw, err = os.ReadFile(filepath.Join(chartFiles, "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var alerts struct {
		Groups []struct {
			Name  string           `json:"name"`
			Rules []map[string]any `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(raw, &alerts); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	rules := 0
	for _, g := range alerts.Groups {
		for _, r := range g.Rules {
			if r["alert"] == nil || r["expr"] == nil {
				t.Errorf("alert rule without a name or an expression: %v", r)
			}
			rules++
			docs = append(docs, r)
		}
	}
	if rules < 4 {
		t.Errorf("%d alert rules; want at least the failed, stalled, not-leading and sync-error ones", rules)
	}

	var queries []string
	for _, d := range docs {
		exprs(d, &queries)
	}
	if len(queries) < 10 {
		t.Fatalf("found only %d queries", len(queries))
	}
	used := map[string]bool{}
	for _, q := range queries {
		for _, name := range metricName.FindAllString(q, -1) {
			used[name] = true
			if !names[name] {
				t.Errorf("query %q names %s, which everynode does not serve", strings.TrimSpace(q), name)
			}
		}
	}
	for _, want := range []string{"everynode_daemonset_rollout_state", "everynode_daemonset_nodes_waiting", "everynode_daemonset_unavailable_pods", "everynode_leading"} {
		if !used[want] {
			t.Errorf("neither the dashboard nor the alerts use %s", want)
		}
	}
}
