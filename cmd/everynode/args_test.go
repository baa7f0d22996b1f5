package main

import "testing"

func TestDaemonSetArg(t *testing.T) {
	for arg, want := range map[string]string{
		"agent": "agent", "daemonset/agent": "agent", "ds/agent": "agent", "DaemonSet/agent": "agent",
		"daemonsets.apps/agent": "agent", "node.agent.v2": "node.agent.v2",
	} {
		if got, err := daemonSetArg(arg); err != nil || got != want {
			t.Errorf("daemonSetArg(%q) = %q, %v; want %q", arg, got, err, want)
		}
	}
	for _, arg := range []string{"pod/agent", "daemonset/", "daemonset/a/b", "deployment/agent"} {
		if got, err := daemonSetArg(arg); err == nil {
			t.Errorf("daemonSetArg(%q) = %q, want an error", arg, got)
		}
	}
}

func TestNodeArg(t *testing.T) {
	for arg, want := range map[string]string{"node/w1": "w1", "nodes/w1": "w1", "no/w1": "w1", "Node/w1": "w1"} {
		if got, ok := nodeArg(arg); !ok || got != want {
			t.Errorf("nodeArg(%q) = %q, %v; want %q", arg, got, ok, want)
		}
	}
	for _, arg := range []string{"w1", "node/", "ds/agent"} {
		if got, ok := nodeArg(arg); ok {
			t.Errorf("nodeArg(%q) = %q, want no node", arg, got)
		}
	}
}
