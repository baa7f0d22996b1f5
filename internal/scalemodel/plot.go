package scalemodel

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// series is one line of a panel.
type series struct {
	name  string
	color string
	value func(Result) float64
}

// panel is one chart of the plot: a measure (or a few) against the node count.
type panel struct {
	title string
	unit  string
	lines []series
}

var panels = []panel{
	{title: "CPU per node event", unit: "ms", lines: []series{
		{"churn", "#1f77b4", func(r Result) float64 { return r.ChurnCPUPerMoveMs }},
	}},
	{title: "Time to converge", unit: "s", lines: []series{
		{"cold create", "#2ca02c", func(r Result) float64 { return r.CreateSeconds }},
		{"full rollout", "#d62728", func(r Result) float64 { return r.RolloutSeconds }},
	}},
	{title: "Controller memory per node", unit: "KiB", lines: []series{
		{"live heap", "#9467bd", func(r Result) float64 { return r.HeapPerNodeKiB }},
	}},
}

const (
	panelW, panelH = 300, 220
	padL, padR     = 50, 15
	padT, padB     = 40, 45
)

// Plot writes the results as an SVG image: one panel per measure, each against the
// node count, both axes from zero.
func Plot(w io.Writer, results []Result) error {
	var b strings.Builder
	width := panelW * len(panels)
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, panelH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, panelH)
	maxNodes := 0
	for _, r := range results {
		maxNodes = max(maxNodes, r.Nodes)
	}
	for i, p := range panels {
		drawPanel(&b, p, results, float64(i*panelW), float64(maxNodes))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func drawPanel(b *strings.Builder, p panel, results []Result, x0, maxNodes float64) {
	top := 0.0
	for _, l := range p.lines {
		for _, r := range results {
			top = max(top, l.value(r))
		}
	}
	top = niceCeil(top)
	left, right := x0+padL, x0+panelW-padR
	bottom, upper := float64(panelH-padB), float64(padT)
	x := func(n float64) float64 { return left + (right-left)*n/maxNodes }
	y := func(v float64) float64 { return bottom - (bottom-upper)*v/top }

	fmt.Fprintf(b, `<text x="%.0f" y="16" font-size="13" font-weight="bold">%s (%s)</text>`+"\n", left, p.title, p.unit)
	for _, v := range []float64{0, top / 2, top} {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-4, y(v)+4, short(v))
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, y(v), right, y(v))
	}
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, bottom, right, bottom)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, bottom, left, upper)
	for _, r := range results {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x(float64(r.Nodes)), bottom+14, short(float64(r.Nodes)))
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">nodes</text>`+"\n", (left+right)/2, bottom+30)
	for li, l := range p.lines {
		var pts []string
		for _, r := range results {
			px, py := x(float64(r.Nodes)), y(l.value(r))
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px, py))
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", px, py, l.color)
		}
		fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), l.color)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="%s">%s</text>`+"\n", left+8, upper+12+float64(li)*13, l.color, l.name)
	}
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (1 for zero).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// short prints v with a k for thousands.
func short(v float64) string {
	switch {
	case v >= 1000 && math.Mod(v, 1000) == 0:
		return fmt.Sprintf("%.0fk", v/1000)
	case v >= 100 || v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.2g", v)
	}
}
