package nodesim

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr string
	}{
		{"defaults are valid", func(*Config) {}, ""},
		{"zero nodes is valid", func(c *Config) { c.Nodes = 0 }, ""},
		{"zero delays are valid", func(c *Config) { c.PodReadyDelay, c.PodStopDelay = 0, 0 }, ""},
		{"zero lease interval and workers mean defaults", func(c *Config) { c.LeaseInterval, c.Workers = 0, 0 }, ""},
		{"negative nodes", func(c *Config) { c.Nodes = -1 }, "nodes"},
		{"too many nodes", func(c *Config) { c.Nodes = MaxNodes + 1 }, "nodes"},
		{"negative ready delay", func(c *Config) { c.PodReadyDelay = -time.Second }, "ready delay"},
		{"negative stop delay", func(c *Config) { c.PodStopDelay = -time.Second }, "stop delay"},
		{"lease interval beyond half the lease", func(c *Config) { c.LeaseInterval = 21 * time.Second }, "lease interval"},
		{"lease interval too short", func(c *Config) { c.LeaseInterval = time.Millisecond }, "lease interval"},
		{"negative lease interval", func(c *Config) { c.LeaseInterval = -time.Second }, "lease interval"},
		{"negative workers", func(c *Config) { c.Workers = -1 }, "workers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.mutate(&c)
			err := c.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate() = %v, want an error about %q", err, tt.wantErr)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	c := DefaultConfig()
	if c.Nodes != 3 || c.PodReadyDelay != time.Second || c.PodStopDelay != time.Second || c.LeaseInterval != 10*time.Second || c.Workers != 4 || c.Clock == nil {
		t.Fatalf("DefaultConfig() = %+v", c)
	}
	if d := (Config{}).withDefaults(); d.Clock == nil || d.Workers != DefaultWorkers || d.LeaseInterval != DefaultLeaseInterval || d.Nodes != 0 {
		t.Fatalf("withDefaults() of zero Config = %+v", d)
	}
}

func TestConfigAddFlags(t *testing.T) {
	c := DefaultConfig()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	c.AddFlags(fs)
	if err := fs.Parse([]string{"--nodes=5000", "--pod-ready-delay=250ms", "--pod-stop-delay=3s"}); err != nil {
		t.Fatal(err)
	}
	if c.Nodes != 5000 || c.PodReadyDelay != 250*time.Millisecond || c.PodStopDelay != 3*time.Second {
		t.Fatalf("after parsing flags: %+v", c)
	}
	if got := fs.Lookup("nodes").DefValue; got != "3" {
		t.Errorf("--nodes default = %s, want 3", got)
	}
}

func TestWorkersGrowWithNodes(t *testing.T) {
	for _, tc := range []struct{ nodes, workers, want int }{
		{nodes: 3, workers: 4, want: 4},
		{nodes: 1000, workers: 4, want: 10},
		{nodes: 5000, workers: 4, want: 50},
		{nodes: 5000, workers: 80, want: 80},
	} {
		if got := workersFor(Config{Nodes: tc.nodes, Workers: tc.workers}); got != tc.want {
			t.Errorf("workersFor(%d nodes, %d workers) = %d, want %d", tc.nodes, tc.workers, got, tc.want)
		}
	}
}
