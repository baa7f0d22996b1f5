package component

import "testing"

func TestFreePortsAreDistinct(t *testing.T) {
	for range 200 {
		ports, err := FreePorts(2)
		if err != nil {
			t.Fatal(err)
		}
		if len(ports) != 2 || ports[0] == ports[1] || ports[0] == 0 {
			t.Fatalf("FreePorts(2) = %v, want two distinct ports", ports)
		}
	}
}
