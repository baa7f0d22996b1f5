package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRatio(t *testing.T) {
	for _, tc := range []struct {
		a, b   float64
		want   float64
		wantOK bool
	}{
		{10, 5, 0.5, true},
		{4, 6, 1.5, true},
		{3, 0, 0, true},
		{0, 3, 0, false},
		{0, 0, 0, false},
		{math.NaN(), 1, 0, false},
		{1, math.NaN(), 0, false},
		{1, math.Inf(1), 0, false},
		{math.Inf(1), 1, 0, false},
	} {
		got, ok := Ratio(tc.a, tc.b)
		if ok != tc.wantOK || got != tc.want {
			t.Errorf("Ratio(%v, %v) = %v, %v; want %v, %v", tc.a, tc.b, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		u    Unit
		v    float64
		want string
	}{
		{Seconds, 3.14159, "3.14"},
		{Seconds, 52.46, "52.5"},
		{Seconds, 1234.4, "1,234"},
		{CPUSeconds, 12.345, "12.35"},
		{Bytes, 5 << 19, "2.5"},
		{Bytes, 123.6 * (1 << 20), "124"},
		{Count, 1234567, "1,234,567"},
		{Count, 999, "999"},
		{Count, -1000, "-1,000"},
		{Millis, 0.456, "0.46"},
		{PerSecond, 312.6, "313"},
		{Factor, 2.345, "2.3×"},
		{Count, math.NaN(), "–"},
		{Seconds, math.Inf(1), "∞"},
	} {
		if got := Format(tc.u, tc.v); got != tc.want {
			t.Errorf("Format(%v, %v) = %q, want %q", tc.u, tc.v, got, tc.want)
		}
	}
}

func TestTableMarkdown(t *testing.T) {
	table := Table{
		Controllers: []string{"upstream", "everynode"},
		Results: []Result{
			{
				Scenario: "create 1×100",
				Runs: []RunMetrics{
					{Controller: "everynode", Metrics: []Metric{
						{Name: "converge (s)", Unit: Seconds, Value: 6},
						{Name: "API errors", Unit: Count, Value: 0, OmitIfZero: true},
						{Name: "API requests: patch", Unit: Count, Value: 0, OmitIfZero: true},
						{Name: "pod creates/s (API server, plain client)", Unit: PerSecond, Value: 300, NoRatio: true},
						{Name: "only everynode", Unit: Count, Value: 7},
					}},
					{Controller: "upstream", Metrics: []Metric{
						{Name: "converge (s)", Unit: Seconds, Value: 12},
						{Name: "API errors", Unit: Count, Value: 0, OmitIfZero: true},
						{Name: "API requests: patch", Unit: Count, Value: 3, OmitIfZero: true},
						{Name: "pod creates/s (API server, plain client)", Unit: PerSecond, Value: 290, NoRatio: true},
						{Name: "status writes", Unit: Count, Value: 0},
					}},
				},
			},
			{
				Scenario: "churn",
				Runs: []RunMetrics{
					{Controller: "upstream", Metrics: []Metric{{Name: "converge (s)", Unit: Seconds, Value: 30}}},
					{Controller: "everynode", Metrics: []Metric{{Name: "converge (s)", Unit: Seconds, Value: math.NaN()}}, Err: errors.New("timed out")},
				},
			},
		},
	}
	want := `| scenario | measure | upstream | everynode | everynode/upstream |
| --- | --- | ---: | ---: | ---: |
| create 1×100 | converge (s) | 12.0 | 6.00 | 0.50 |
|  | API requests: patch | 3 | 0 | 0.00 |
|  | pod creates/s (API server, plain client) | 290 | 300 | – |
|  | status writes | 0 | – | – |
|  | only everynode | – | 7 | – |
| churn | converge (s) | 30.0 | failed | – |

FAILED: churn, everynode: timed out
`
	if diff := cmp.Diff(want, table.Markdown()); diff != "" {
		t.Errorf("Markdown (-want +got):\n%s", diff)
	}
}

// With the floor controller, the table has a third column and the ratio
// everynode/floor; scenarios the floor does not run show no values and no failure.
func TestTableMarkdownWithTheFloor(t *testing.T) {
	table := Table{
		Controllers: []string{"upstream", "everynode", "floor"},
		Results: []Result{
			{Scenario: "create", Runs: []RunMetrics{
				{Controller: "upstream", Metrics: []Metric{{Name: "converge (s)", Unit: Seconds, Value: 12}}},
				{Controller: "everynode", Metrics: []Metric{{Name: "converge (s)", Unit: Seconds, Value: 6}}},
				{Controller: "floor", Skipped: true},
			}},
			{Scenario: "churn", Runs: []RunMetrics{
				{Controller: "upstream", Metrics: []Metric{{Name: "move p99 (s)", Unit: Seconds, Value: 1}}},
				{Controller: "everynode", Metrics: []Metric{{Name: "move p99 (s)", Unit: Seconds, Value: 0.8}}},
				{Controller: "floor", Metrics: []Metric{{Name: "move p99 (s)", Unit: Seconds, Value: 0.1}}},
			}},
		},
	}
	want := `| scenario | measure | upstream | everynode | floor | everynode/upstream | everynode/floor |
| --- | --- | ---: | ---: | ---: | ---: | ---: |
| create | converge (s) | 12.0 | 6.00 | – | 0.50 | – |
| churn | move p99 (s) | 1.00 | 0.80 | 0.10 | 0.80 | 8.00 |
`
	if diff := cmp.Diff(want, table.Markdown()); diff != "" {
		t.Errorf("Markdown (-want +got):\n%s", diff)
	}
}

// The JSON report carries every run and metric with raw values and named units; a
// latency some node never reached is null and infinite, not a number JSON cannot hold.
func TestJSONReport(t *testing.T) {
	r := JSONReport{Controllers: []string{Upstream, EveryNode}, Scenarios: []JSONScenario{{Name: "burst", Title: "burst: …", Runs: []JSONRun{
		jsonRun(RunMetrics{Controller: Upstream, Metrics: []Metric{
			{Name: "burst: created → node Ready, p99 (s)", Unit: Seconds, Value: math.Inf(1)},
			{Name: "controller peak RSS, VmHWM (MiB)", Unit: Bytes, Value: 3 << 20},
		}}, 90*time.Second),
		jsonRun(RunMetrics{Controller: EveryNode, Err: errors.New("not converged")}, time.Second),
	}}}}
	var buf bytes.Buffer
	if err := r.Write(&buf); err != nil {
		t.Fatal(err)
	}
	var back JSONReport
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatalf("the report does not read back: %v\n%s", err, buf.String())
	}
	runs := back.Scenarios[0].Runs
	ms := runs[0].Metrics
	if len(ms) != 2 || ms[0].Value != nil || !ms[0].Infinite || ms[1].Unit != "bytes" || ms[1].Value == nil || *ms[1].Value != 3<<20 {
		t.Errorf("metrics read back as %+v", ms)
	}
	if runs[0].Seconds != 90 || runs[1].Error != "not converged" {
		t.Errorf("runs read back as %+v", runs)
	}
}
