package bench

import (
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestRoundOrderTakesTurns(t *testing.T) {
	given := []string{Upstream, EveryNode, Floor}
	want := [][]string{
		{Upstream, EveryNode, Floor},
		{Floor, EveryNode, Upstream},
		{Upstream, EveryNode, Floor},
		{Floor, EveryNode, Upstream},
	}
	for i, w := range want {
		if got := roundOrder(given, i+1); !cmp.Equal(got, w) {
			t.Errorf("round %d: %v, want %v", i+1, got, w)
		}
	}
	if !cmp.Equal(given, []string{Upstream, EveryNode, Floor}) {
		t.Errorf("roundOrder changed its argument: %v", given)
	}
}

func TestRunNames(t *testing.T) {
	for _, tc := range []struct {
		round, rounds            int
		wantTag, wantLabel, want string
	}{
		{1, 1, "churn-floor", "floor", "churn/floor"},
		{2, 3, "churn-floor-round2", "floor, round 2", "churn/floor (round 2)"},
	} {
		tag, label, title := runNames("churn", Floor, tc.round, tc.rounds)
		if tag != tc.wantTag || label != tc.wantLabel || title != tc.want {
			t.Errorf("runNames(round %d of %d) = %q, %q, %q; want %q, %q, %q", tc.round, tc.rounds, tag, label, title, tc.wantTag, tc.wantLabel, tc.want)
		}
	}
}

func TestMedian(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{7}, 7},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{inf, 1, 2}, 2},
		{[]float64{inf, 1, inf}, inf},
		{[]float64{1, inf}, inf},
	} {
		in := append([]float64(nil), tc.in...)
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		if !cmp.Equal(in, tc.in) {
			t.Errorf("median reordered its argument: %v, was %v", tc.in, in)
		}
	}
}

func TestMedianRun(t *testing.T) {
	cpu := func(v float64) Metric { return Metric{Name: "cpu", Unit: Millis, Value: v} }
	rate := func(v float64) Metric { return Metric{Name: "rate", Unit: PerSecond, Value: v, NoRatio: true} }
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		runs []RunMetrics
		want RunMetrics
	}{{
		name: "one run is shown as it is",
		runs: []RunMetrics{{Controller: EveryNode, Metrics: []Metric{cpu(5), {Name: "nan", Value: math.NaN()}}, Err: boom}},
		want: RunMetrics{Controller: EveryNode, Metrics: []Metric{cpu(5), {Name: "nan", Value: math.NaN()}}, Err: boom},
	}, {
		name: "each metric's median, its unit and flags kept",
		runs: []RunMetrics{
			{Controller: Floor, Metrics: []Metric{cpu(6), rate(300)}},
			{Controller: Floor, Metrics: []Metric{cpu(4), rate(500)}},
			{Controller: Floor, Metrics: []Metric{cpu(5), rate(100)}},
		},
		want: RunMetrics{Controller: Floor, Metrics: []Metric{cpu(5), rate(300)}},
	}, {
		name: "a metric only some runs measured: the median of those",
		runs: []RunMetrics{
			{Controller: EveryNode, Metrics: []Metric{cpu(6)}},
			{Controller: EveryNode, Metrics: []Metric{cpu(4), rate(200)}},
			{Controller: EveryNode, Metrics: []Metric{cpu(8), {Name: "rate", Unit: PerSecond, Value: math.NaN()}}},
		},
		want: RunMetrics{Controller: EveryNode, Metrics: []Metric{cpu(6), {Name: "rate", Unit: PerSecond, Value: 200, NoRatio: true}}},
	}, {
		name: "a failed round: the finished rounds' medians and the failure",
		runs: []RunMetrics{
			{Controller: EveryNode, Metrics: []Metric{cpu(6)}},
			{Controller: EveryNode, Metrics: []Metric{cpu(100)}, Err: boom},
			{Controller: EveryNode, Metrics: []Metric{cpu(4)}},
		},
		want: RunMetrics{Controller: EveryNode, Metrics: []Metric{cpu(5)}, Err: errors.New("round 2: boom")},
	}, {
		name: "every round failed: the first's partial metrics",
		runs: []RunMetrics{
			{Controller: EveryNode, Metrics: []Metric{cpu(1)}, Err: boom},
			{Controller: EveryNode, Metrics: []Metric{cpu(2)}, Err: boom},
		},
		want: RunMetrics{Controller: EveryNode, Metrics: []Metric{cpu(1)}, Err: errors.New("round 1: boom")},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := medianRun(tc.runs)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateNaNs(), cmp.Comparer(sameError)); diff != "" {
				t.Errorf("medianRun (-want +got):\n%s", diff)
			}
			if got.Err != nil && !errors.Is(got.Err, boom) {
				t.Errorf("the failure %v does not wrap the run's error", got.Err)
			}
		})
	}
}

// sameError compares errors by message.
func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Error() == b.Error()
}
