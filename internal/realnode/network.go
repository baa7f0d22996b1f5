package realnode

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// MaxNodes is how many real nodes a sandbox can have: the addresses of its links
// (a /30 each) come from a block of 64 per API server port.
const MaxNodes = 16

// linkBase is the range every link's addresses come from: the shared address space
// of RFC 6598, which no public host uses. A sandbox on port P takes the 64
// addresses at base + 64·P, so sandboxes on different ports never collide.
var linkBase = netip.MustParseAddr("100.64.0.0")

// link is a real node's network: a network namespace joined to the host by a veth
// pair, a /30 with the host's end at HostIP and the node's at NodeIP.
type link struct {
	Namespace string // as `ip netns` names it
	HostIf    string
	NodeIf    string
	HostIP    netip.Addr
	NodeIP    netip.Addr
}

// nodeLink is the link of the index-th real node (from 1) of the sandbox on port.
func nodeLink(port, index int) link {
	offset := uint32(port)*64 + uint32(index-1)*4
	b := linkBase.As4()
	base := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	addr := func(n uint32) netip.Addr {
		v := base + offset + n
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	return link{
		Namespace: fmt.Sprintf("everynode-%d-%s", port, NodeName(index)),
		HostIf:    fmt.Sprintf("en%dh%d", port, index),
		NodeIf:    fmt.Sprintf("en%dn%d", port, index),
		HostIP:    addr(1),
		NodeIP:    addr(2),
	}
}

// netnsDir is where `ip netns` binds named network namespaces.
const netnsDir = "/run/netns"

// NamespacePath is where the namespace is bound, for nsenter.
func (l link) NamespacePath() string { return netnsDir + "/" + l.Namespace }

// up creates the namespace and the veth pair and addresses both ends. A link left by
// a sandbox that did not stop cleanly is removed first.
func (l link) up() error {
	l.down()
	for _, args := range [][]string{
		{"netns", "add", l.Namespace},
		{"link", "add", l.HostIf, "type", "veth", "peer", "name", l.NodeIf, "netns", l.Namespace},
		{"addr", "add", l.HostIP.String() + "/30", "dev", l.HostIf},
		{"link", "set", l.HostIf, "up"},
		{"-n", l.Namespace, "addr", "add", l.NodeIP.String() + "/30", "dev", l.NodeIf},
		{"-n", l.Namespace, "link", "set", l.NodeIf, "up"},
		{"-n", l.Namespace, "link", "set", "lo", "up"},
	} {
		if err := ip(args...); err != nil {
			l.down()
			return err
		}
	}
	return nil
}

// down removes the namespace and the veth pair; what is already gone is skipped.
// `ip netns add` turns /run/netns into a mount of its own; once no namespace is left
// there, that mount goes too.
func (l link) down() {
	_ = ip("link", "del", l.HostIf)
	_ = ip("netns", "del", l.Namespace)
	if entries, err := os.ReadDir(netnsDir); err == nil && len(entries) == 0 {
		_ = syscall.Unmount(netnsDir, syscall.MNT_DETACH)
	}
}

func ip(args ...string) error {
	var stderr bytes.Buffer
	cmd := exec.Command("ip", args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
