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
