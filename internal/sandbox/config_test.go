package sandbox

import (
	"strings"
	"testing"
)

func TestValidate_RealNodes(t *testing.T) {
	for _, tc := range []struct {
		n       int
		wantErr string
	}{
		{0, ""},
		{1, ""},
		{16, ""},
		{17, "--real-nodes must be between 0 and 16, got 17"},
		{-1, "--real-nodes must be between 0 and 16, got -1"},
	} {
		cfg := DefaultConfig()
		cfg.RealNodes = tc.n
		err := cfg.Validate()
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("--real-nodes %d: got %v, want %q", tc.n, err, tc.wantErr)
		}
	}
}

func TestValidate_Controller(t *testing.T) {
	for _, tc := range []struct {
		controller string
		realNodes  int
		wantErr    string
	}{
		{"everynode", 0, ""},
		{"none", 0, ""},
		{"chart", 1, ""},
		{"chart-companion", 2, ""},
		{"chart", 0, "--controller chart runs everynode as a pod on a real node: add --real-nodes 1"},
		{"chart-companion", 0, "--controller chart-companion runs everynode as a pod on a real node: add --real-nodes 1"},
		{"kcm", 0, `--controller must be one of everynode, upstream, companion, none, chart, chart-companion, got "kcm"`},
	} {
		cfg := DefaultConfig()
		cfg.Controller, cfg.RealNodes = tc.controller, tc.realNodes
		err := cfg.Validate()
		if (err == nil) != (tc.wantErr == "") || (err != nil && err.Error() != tc.wantErr) {
			t.Errorf("--controller %s --real-nodes %d: got %v, want %q", tc.controller, tc.realNodes, err, tc.wantErr)
		}
	}
}
