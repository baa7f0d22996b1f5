package nodesim

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Address plan. Every simulated node has an index; from it come the node's
// InternalIP, 10.0.0.0 + index + 1 (sim-node-0 is 10.0.0.1), and its pod range, the
// index-th /24 of 10.128.0.0/9 (sim-node-0 gets 10.128.0.0/24, sim-node-256
// 10.129.0.0/24). The two spaces never overlap for indexes below MaxNodes.

// nodeIP returns the InternalIP of the node with the given index.
func nodeIP(index int) netip.Addr {
	n := uint32(index) + 1
	return netip.AddrFrom4([4]byte{10, byte(n >> 16), byte(n >> 8), byte(n)})
}

// podCIDR returns the pod range of the node with the given index.
func podCIDR(index int) netip.Prefix {
	n := uint32(index)
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 128 + byte(n>>8), byte(n), 0}), 24)
}

// indexFromPodCIDR reverses podCIDR; ok is false for ranges outside the plan.
func indexFromPodCIDR(cidr string) (int, bool) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil || p.Bits() != 24 || !p.Addr().Is4() {
		return 0, false
	}
	b := p.Addr().As4()
	if b[0] != 10 || b[1] < 128 || b[3] != 0 {
		return 0, false
	}
	return int(b[1]-128)<<8 | int(b[2]), true
}

// indexFromName returns N for a node named sim-node-N.
func indexFromName(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, NodeNamePrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n >= MaxNodes || strconv.Itoa(n) != s {
		return 0, false
	}
	return n, true
}

// nodeIndexes hands out node indexes. A node keeps the index its stored pod range
// names; otherwise sim-node-N gets N when free, and any other node the lowest free
// index at or above firstFree (the indexes below it are kept for the registered nodes).
type nodeIndexes struct {
	mu        sync.Mutex
	firstFree int
	byName    map[string]int
	owner     map[int]string
}

func newNodeIndexes(registered int) *nodeIndexes {
	return &nodeIndexes{firstFree: registered, byName: map[string]int{}, owner: map[int]string{}}
}

// assign returns the index of the named node with the given spec.podCIDR.
func (x *nodeIndexes) assign(name, cidr string) (int, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if i, ok := x.byName[name]; ok {
		return i, nil
	}
	if i, ok := indexFromPodCIDR(cidr); ok {
		// The stored range is a fact; it wins even over a clashing claim.
		x.take(name, i)
		return i, nil
	}
	if i, ok := indexFromName(name); ok {
		if _, taken := x.owner[i]; !taken {
			x.take(name, i)
			return i, nil
		}
	}
	for i := x.firstFree; i < MaxNodes; i++ {
		if _, taken := x.owner[i]; !taken {
			x.take(name, i)
			return i, nil
		}
	}
	return 0, fmt.Errorf("no free node index for %s: more than %d simulated nodes", name, MaxNodes)
}

func (x *nodeIndexes) take(name string, i int) {
	x.byName[name] = i
	x.owner[i] = name
}

// release frees the index of a node that is gone.
func (x *nodeIndexes) release(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if i, ok := x.byName[name]; ok {
		delete(x.byName, name)
		if x.owner[i] == name {
			delete(x.owner, i)
		}
	}
}

// podIPs hands out pod IPs, unique among the live pods of each node.
type podIPs struct {
	mu    sync.Mutex
	used  map[string]map[netip.Addr]string // node → IP → pod key
	byPod map[string]podIP                 // pod key → its IP
}

type podIP struct {
	node string
	uid  types.UID
	ip   netip.Addr
}

func newPodIPs() *podIPs {
	return &podIPs{used: map[string]map[netip.Addr]string{}, byPod: map[string]podIP{}}
}

// assign returns the IP of the pod with the given key and UID on node, whose pod
// range is cidr. current is the IP the pod's stored status already has; it is kept.
func (a *podIPs) assign(key string, uid types.UID, node, cidr, current string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if got, ok := a.byPod[key]; ok {
		if got.uid == uid && got.node == node {
			return got.ip.String(), nil
		}
		a.releaseLocked(key)
	}
	used := a.used[node]
	if used == nil {
		used = map[netip.Addr]string{}
		a.used[node] = used
	}
	if ip, err := netip.ParseAddr(current); err == nil {
		used[ip] = key
		a.byPod[key] = podIP{node: node, uid: uid, ip: ip}
		return ip.String(), nil
	}
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil {
		return "", fmt.Errorf("node %s has no usable pod range %q: %w", node, cidr, err)
	}
	prefix = prefix.Masked()
	last := lastAddr(prefix)
	// Skip the network address and the first host, which a gateway would hold.
	for ip := prefix.Addr().Next().Next(); ip.IsValid() && prefix.Contains(ip) && ip != last; ip = ip.Next() {
		if _, taken := used[ip]; !taken {
			used[ip] = key
			a.byPod[key] = podIP{node: node, uid: uid, ip: ip}
			return ip.String(), nil
		}
	}
	return "", fmt.Errorf("pod range %s of node %s is exhausted", prefix, node)
}

// release frees the IP of a pod that is gone.
func (a *podIPs) release(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.releaseLocked(key)
}

func (a *podIPs) releaseLocked(key string) {
	got, ok := a.byPod[key]
	if !ok {
		return
	}
	delete(a.byPod, key)
	if used := a.used[got.node]; used[got.ip] == key {
		delete(used, got.ip)
		if len(used) == 0 {
			delete(a.used, got.node)
		}
	}
}

// lastAddr returns the highest address of an IPv4 prefix (its broadcast address),
// or the invalid Addr for IPv6, which has none.
func lastAddr(p netip.Prefix) netip.Addr {
	if !p.Addr().Is4() {
		return netip.Addr{}
	}
	b := p.Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v |= 1<<(32-p.Bits()) - 1
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
