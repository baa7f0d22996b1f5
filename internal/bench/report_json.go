package bench

import (
	"encoding/json"
	"io"
	"math"
	"time"
)

// The results as JSON, for scripts that compare runs: the same runs and metrics as
// the markdown table, with raw values (seconds, bytes, counts) and each unit named.

// JSONReport is a benchmark run's results.
type JSONReport struct {
	Started time.Time `json:"started"`
	Machine string    `json:"machine"`
	Command string    `json:"command,omitempty"`
	// QPS and Burst are the controllers' client rate limit; QPS 0 for none.
	QPS         float32        `json:"qps"`
	Burst       int            `json:"burst"`
	Controllers []string       `json:"controllers"`
	Scenarios   []JSONScenario `json:"scenarios"`
}

// JSONScenario is one scenario's runs, one per controller and round, in the order
// they ran.
type JSONScenario struct {
	Name  string    `json:"name"`
	Title string    `json:"title"`
	Runs  []JSONRun `json:"runs"`
}

// JSONRun is what one controller measured in one scenario.
type JSONRun struct {
	Controller string       `json:"controller"`
	Round      int          `json:"round,omitempty"` // from 1, with --rounds above 1
	Skipped    bool         `json:"skipped,omitempty"`
	Error      string       `json:"error,omitempty"`
	Seconds    float64      `json:"seconds,omitempty"` // sandbox start to stop
	Metrics    []JSONMetric `json:"metrics,omitempty"`
}

// JSONMetric is one measured value. Value is null, and Infinite true, for a latency
// some node never reached (the table's ∞).
type JSONMetric struct {
	Name     string   `json:"name"`
	Unit     string   `json:"unit"`
	Value    *float64 `json:"value"`
	Infinite bool     `json:"infinite,omitempty"`
}

// unitNames name the units in JSON.
var unitNames = map[Unit]string{
	Seconds: "seconds", CPUSeconds: "cpu-seconds", Bytes: "bytes", Count: "count",
	Millis: "milliseconds", PerSecond: "per-second", Factor: "factor",
}

// jsonRun is r, which took took, as JSON.
func jsonRun(r RunMetrics, took time.Duration) JSONRun {
	out := JSONRun{Controller: r.Controller, Skipped: r.Skipped, Seconds: took.Seconds()}
	if r.Err != nil {
		out.Error = r.Err.Error()
	}
	for _, m := range r.Metrics {
		jm := JSONMetric{Name: m.Name, Unit: unitNames[m.Unit]}
		switch {
		case math.IsInf(m.Value, 0):
			jm.Infinite = true
		case !math.IsNaN(m.Value):
			v := m.Value
			jm.Value = &v
		}
		out.Metrics = append(out.Metrics, jm)
	}
	return out
}

// Write writes the report as indented JSON.
func (r *JSONReport) Write(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
