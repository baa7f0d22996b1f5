package nodesim

import (
	"fmt"
	"net/netip"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestAddressPlan(t *testing.T) {
	tests := []struct {
		index        int
		nodeIP, pods string
	}{
		{0, "10.0.0.1", "10.128.0.0/24"},
		{1, "10.0.0.2", "10.128.1.0/24"},
		{254, "10.0.0.255", "10.128.254.0/24"},
		{255, "10.0.1.0", "10.128.255.0/24"},
		{256, "10.0.1.1", "10.129.0.0/24"},
		{4999, "10.0.19.136", "10.147.135.0/24"},
		{MaxNodes - 1, "10.0.128.0", "10.255.255.0/24"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.index), func(t *testing.T) {
			if got := nodeIP(tt.index).String(); got != tt.nodeIP {
				t.Errorf("nodeIP = %s, want %s", got, tt.nodeIP)
			}
			if got := podCIDR(tt.index).String(); got != tt.pods {
				t.Errorf("podCIDR = %s, want %s", got, tt.pods)
			}
			if got, ok := indexFromPodCIDR(tt.pods); !ok || got != tt.index {
				t.Errorf("indexFromPodCIDR(%s) = %d, %v", tt.pods, got, ok)
			}
		})
	}
	for _, cidr := range []string{"", "10.127.0.0/24", "192.168.0.0/24", "10.128.0.0/16", "10.128.0.5/24", "fd00::/64", "nonsense"} {
		if i, ok := indexFromPodCIDR(cidr); ok {
			t.Errorf("indexFromPodCIDR(%q) = %d, want not ok", cidr, i)
		}
	}
}

func TestIndexFromName(t *testing.T) {
	for name, want := range map[string]int{"sim-node-0": 0, "sim-node-42": 42} {
		if got, ok := indexFromName(name); !ok || got != want {
			t.Errorf("indexFromName(%s) = %d, %v", name, got, ok)
		}
	}
	for _, name := range []string{"node-1", "sim-node-", "sim-node-01", "sim-node--1", "sim-node-x", fmt.Sprintf("sim-node-%d", MaxNodes)} {
		if _, ok := indexFromName(name); ok {
			t.Errorf("indexFromName(%s) ok, want not", name)
		}
	}
}

func TestNodeIndexes(t *testing.T) {
	x := newNodeIndexes(3)
	assign := func(name, cidr string) int {
		t.Helper()
		i, err := x.assign(name, cidr)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	if got := assign("sim-node-1", ""); got != 1 {
		t.Errorf("registered node takes its own index: got %d", got)
	}
	if got := assign("edge", "10.128.7.0/24"); got != 7 {
		t.Errorf("stored pod range wins: got %d", got)
	}
	if got := assign("other", ""); got != 3 {
		t.Errorf("adopted node gets the lowest free index past the registered ones: got %d", got)
	}
	if got := assign("sim-node-7", ""); got != 4 {
		t.Errorf("sim-node-N whose N is taken gets a free index: got %d", got)
	}
	if got := assign("other", ""); got != 3 {
		t.Errorf("assignment is stable: got %d", got)
	}
	x.release("other")
	if got := assign("third", ""); got != 3 {
		t.Errorf("released index is reused: got %d", got)
	}
}

func TestPodIPs(t *testing.T) {
	a := newPodIPs()
	assign := func(key, uid, node, cidr, current string) string {
		t.Helper()
		ip, err := a.assign(key, types.UID(uid), node, cidr, current)
		if err != nil {
			t.Fatal(err)
		}
		return ip
	}
	if got := assign("ns/a", "a", "n0", "10.128.0.0/24", ""); got != "10.128.0.2" {
		t.Errorf("first pod IP = %s, want 10.128.0.2", got)
	}
	if got := assign("ns/b", "b", "n0", "10.128.0.0/24", ""); got != "10.128.0.3" {
		t.Errorf("second pod IP = %s, want 10.128.0.3", got)
	}
	if got := assign("ns/a", "a", "n0", "10.128.0.0/24", ""); got != "10.128.0.2" {
		t.Errorf("a pod keeps its IP: got %s", got)
	}
	if got := assign("ns/c", "c", "n1", "10.128.1.0/24", ""); got != "10.128.1.2" {
		t.Errorf("other node, other range: got %s", got)
	}
	if got := assign("ns/d", "d", "n0", "10.128.0.0/24", "10.128.0.9"); got != "10.128.0.9" {
		t.Errorf("a stored IP is kept: got %s", got)
	}
	a.release("ns/a")
	if got := assign("ns/e", "e", "n0", "10.128.0.0/24", ""); got != "10.128.0.2" {
		t.Errorf("released IP is reused: got %s", got)
	}
	if got := assign("ns/e", "e2", "n0", "10.128.0.0/24", ""); got != "10.128.0.2" {
		t.Errorf("a recreated pod with the same name gets a free IP: got %s", got)
	}

	small := newPodIPs()
	seen := map[string]bool{}
	for i := range 5 { // a /29 has 8 addresses: network, gateway, 5 pods, broadcast
		ip, err := small.assign(fmt.Sprint(i), types.UID(fmt.Sprint(i)), "n", "192.168.0.0/29", "")
		if err != nil || seen[ip] {
			t.Fatalf("assign %d = %s, %v", i, ip, err)
		}
		seen[ip] = true
	}
	if ip, err := small.assign("x", "x", "n", "192.168.0.0/29", ""); err == nil {
		t.Errorf("exhausted range handed out %s", ip)
	}
	if _, err := small.assign("y", "y", "m", "", ""); err == nil {
		t.Error("node without a pod range handed out an IP")
	}
	if got := lastAddr(netip.MustParsePrefix("10.128.3.0/24")).String(); got != "10.128.3.255" {
		t.Errorf("lastAddr = %s", got)
	}
}
