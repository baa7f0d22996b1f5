package sandbox

import (
	"os"
	"testing"
)

// TestLoadPortsReplacesEqualPorts: a ports file whose client and peer port are the
// same (etcd could never bind both, so it never served on them) gets two new,
// distinct ports, kept for the next start; distinct ports are kept as they are.
func TestLoadPortsReplacesEqualPorts(t *testing.T) {
	p := paths{t.TempDir()}
	if err := os.WriteFile(p.state(), []byte(`{"etcdClient":35591,"etcdPeer":35591}`), 0o600); err != nil {
		t.Fatal(err)
	}
	pt, err := loadPorts(p)
	if err != nil {
		t.Fatal(err)
	}
	if pt.EtcdClient == pt.EtcdPeer || pt.EtcdClient == 0 {
		t.Fatalf("loadPorts = %+v, want two distinct ports", pt)
	}
	again, err := loadPorts(p)
	if err != nil || again != pt {
		t.Errorf("second loadPorts = %+v, %v; want the kept %+v", again, err, pt)
	}
}
