package scalemodel

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

// The plot is well-formed SVG with one line per measure, each through every size.
func TestPlot(t *testing.T) {
	results := []Result{
		{Nodes: 10000, ChurnCPUPerMoveMs: 1.8, CreateSeconds: 6.4, RolloutSeconds: 10.5, HeapPerNodeKiB: 14.4},
		{Nodes: 30000, ChurnCPUPerMoveMs: 2.2, CreateSeconds: 23.7, RolloutSeconds: 39.3, HeapPerNodeKiB: 14.9},
	}
	var buf bytes.Buffer
	if err := Plot(&buf, results); err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(&buf)
	lines := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v", err)
		}
		if el, ok := tok.(xml.StartElement); ok && el.Name.Local == "polyline" {
			lines++
			for _, a := range el.Attr {
				if a.Name.Local == "points" && len(strings.Fields(a.Value)) != len(results) {
					t.Errorf("a line through %q, want %d points", a.Value, len(results))
				}
			}
		}
	}
	if lines != 4 {
		t.Errorf("%d lines, want 4 (CPU per event, cold create, rollout, memory)", lines)
	}
}
