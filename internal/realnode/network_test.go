package realnode

import (
	"net/netip"
	"testing"
)

func TestNodeLink_AddressesAreDistinctPrivateAndNamesFit(t *testing.T) {
	shared := netip.MustParsePrefix("100.64.0.0/10")
	seen := map[netip.Addr]string{}
	for _, port := range []int{1, 6443, 6444, 65535} {
		for i := 1; i <= MaxNodes; i++ {
			l := nodeLink(port, i)
			for _, a := range []netip.Addr{l.HostIP, l.NodeIP} {
				if !shared.Contains(a) {
					t.Fatalf("port %d node %d: %s is outside %s", port, i, a, shared)
				}
				if other, ok := seen[a]; ok {
					t.Fatalf("port %d node %d: %s is also %s's", port, i, a, other)
				}
				seen[a] = l.Namespace
			}
			// Both ends share one /30, whose network and broadcast addresses neither takes.
			p := netip.PrefixFrom(l.HostIP, 30).Masked()
			broadcast := p.Addr().Next().Next().Next()
			if !p.Contains(l.NodeIP) || l.HostIP == p.Addr() || l.NodeIP == p.Addr() || l.HostIP == broadcast || l.NodeIP == broadcast {
				t.Fatalf("port %d node %d: %s and %s are not the hosts of one /30", port, i, l.HostIP, l.NodeIP)
			}
			// Linux limits interface names to 15 bytes.
			if len(l.HostIf) > 15 || len(l.NodeIf) > 15 {
				t.Fatalf("port %d node %d: interface names %q, %q are too long", port, i, l.HostIf, l.NodeIf)
			}
		}
	}
}
