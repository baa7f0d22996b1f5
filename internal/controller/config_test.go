package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestConfigFlagsAndValidation(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		explicit bool
		wantErr  string // substring; empty: valid
	}{
		{name: "defaults are valid", args: nil},
		{name: "companion mode", args: []string{"--mode=companion"}},
		{name: "unknown mode", args: []string{"--mode=shadow"}, wantErr: `--mode must be full or companion, got "shadow"`},
		{name: "workers at least one", args: []string{"--workers=0"}, wantErr: "--workers must be at least 1"},
		{name: "burst replicas at least one", args: []string{"--burst-replicas=0"}, wantErr: "--burst-replicas must be at least 1"},
		{name: "pod writers at least one", args: []string{"--pod-writers=0"}, wantErr: "--pod-writers must be at least 1"},
		{name: "negative api burst", args: []string{"--kube-api-burst=-1"}, wantErr: "--kube-api-burst must not be negative"},
		{name: "qps needs a burst", args: []string{"--kube-api-qps=5", "--kube-api-burst=0"}, wantErr: "--kube-api-burst must be at least 1"},
		{name: "unlimited qps needs no burst", args: []string{"--kube-api-qps=0", "--kube-api-burst=0"}},
		{name: "json wire format", args: []string{"--kube-api-content-type=application/json"}},
		{name: "unknown wire format", args: []string{"--kube-api-content-type=yaml"}, wantErr: `--kube-api-content-type must be application/vnd.kubernetes.protobuf or application/json, got "yaml"`},
		{name: "no request timeout", args: []string{"--kube-api-timeout=0"}},
		{name: "negative request timeout", args: []string{"--kube-api-timeout=-1s"}, wantErr: "--kube-api-timeout must not be negative"},
		{name: "negative resync", args: []string{"--resync=-1s"}, wantErr: "--resync must not be negative"},
		{name: "negative sync batch period", args: []string{"--sync-batch-period=-1ms"}, wantErr: "--sync-batch-period must not be negative"},
		{name: "lease shorter than renew deadline", args: []string{"--leader-elect", "--leader-elect-lease-duration=5s"}, explicit: true,
			wantErr: "--leader-elect-lease-duration (5s) must be longer than --leader-elect-renew-deadline (10s)"},
		{name: "renew deadline shorter than retry", args: []string{"--leader-elect", "--leader-elect-renew-deadline=1s"}, explicit: true,
			wantErr: "--leader-elect-renew-deadline (1s) must be longer than --leader-elect-retry-period (2s)"},
		{name: "leader settings checked when leader election may default on", args: []string{"--leader-elect-lease="}, wantErr: "must not be empty"},
		{name: "leader settings ignored when leader election is explicitly off", args: []string{"--leader-elect=false", "--leader-elect-lease="}, explicit: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			cfg.AddFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatalf("parse: %v", err)
			}
			err := cfg.Validate(tt.explicit)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.Mode != ModeFull {
		t.Errorf("default mode = %q, want %q", cfg.Mode, ModeFull)
	}
	if cfg.Workers != 2 || cfg.QPS != 20 || cfg.Burst != 30 || cfg.BurstReplicas != 250 || cfg.LeaderElect {
		t.Errorf("defaults = %+v, want workers 2, qps 20, burst 30, burst-replicas 250, leader election off until in-cluster", cfg)
	}
	if cfg.Leader.LeaseDuration != 15*time.Second || cfg.Leader.Name != "everynode" {
		t.Errorf("leader defaults = %+v", cfg.Leader)
	}
}
