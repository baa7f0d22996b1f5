package main

import (
	"fmt"
	"strings"
)

// daemonSetArg is the DaemonSet an argument names: NAME, or kubectl's
// TYPE/NAME with TYPE daemonset, daemonsets, ds or daemonset.apps.
func daemonSetArg(arg string) (string, error) {
	kind, name, ok := strings.Cut(arg, "/")
	if !ok {
		return arg, nil
	}
	switch strings.ToLower(kind) {
	case "daemonset", "daemonsets", "ds", "daemonset.apps", "daemonsets.apps":
		if name != "" && !strings.Contains(name, "/") {
			return name, nil
		}
	}
	return "", fmt.Errorf("%q is not a DaemonSet: pass its name, or daemonset/NAME (explain also takes node/NAME)", arg)
}

// nodeArg reads kubectl's node/NAME (or nodes/, no/), the argument that asks about a
// node rather than a DaemonSet.
func nodeArg(arg string) (string, bool) {
	kind, name, ok := strings.Cut(arg, "/")
	if !ok || name == "" {
		return "", false
	}
	switch strings.ToLower(kind) {
	case "node", "nodes", "no":
		return name, true
	}
	return "", false
}
