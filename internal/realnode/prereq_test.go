package realnode

import (
	"os"
	"strings"
	"testing"
)

func TestCheckHost_NamesWhatIsMissingAndHowToInstallIt(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no containerd, runc, ctr, nsenter or ip
	err := CheckHost()
	if err == nil {
		t.Fatal("CheckHost found every tool on an empty PATH")
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("the message is not one line: %q", msg)
	}
	if os.Geteuid() != 0 {
		if !strings.Contains(msg, "root") {
			t.Errorf("as a non-root user, the message should say real nodes need root: %q", msg)
		}
		return
	}
	for _, want := range append(append([]string{}, hostTools...), InstallCommand) {
		if !strings.Contains(msg, want) {
			t.Errorf("the message does not name %q: %q", want, msg)
		}
	}
}
