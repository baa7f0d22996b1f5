package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/everynode/everynode/internal/inspect"
	"github.com/everynode/everynode/internal/nodesim"
)

// TestExplainShowsTheFailedPodBackoff: a DaemonSet whose pods fail a second after
// they start. Each replacement records how many pods failed on its node before it,
// so `everynode explain`, reading only the cluster, shows the node's back-off: how
// many pods failed there and until when the failed one is left alone.
func TestExplainShowsTheFailedPodBackoff(t *testing.T) {
	ns := newNamespace(t)
	pool := map[string]string{"e2e/pool": ns}
	nodes := newNodes(t, 1, pool)
	ds := daemonSet(ns, "agent", pool)
	ds.Spec.Template.Annotations = map[string]string{nodesim.AnnotationPhase: "Failed", nodesim.AnnotationReadyAfter: "1s"}
	createDaemonSet(t, ds)

	var last inspect.JSONNode
	waitFor(t, "explain to show the node backing off after three failed pods", func(ctx context.Context) (bool, error) {
		out, ok := everynodeCmd(t, "explain", "agent", nodes[0], "-n", ns, "-o", "json")
		if !ok {
			return false, nil
		}
		var report inspect.JSON
		if err := json.Unmarshal([]byte(out), &report); err != nil || len(report.Nodes) != 1 {
			return false, nil
		}
		last = report.Nodes[0]
		return last.Waiting == "FailedPodBackoff" && last.FailedPods >= 3 && last.Until != nil, nil
	})
	if !strings.Contains(last.WaitMessage, "failed pods here so far") {
		t.Errorf("wait message %q does not count the failures", last.WaitMessage)
	}
	// The text form is read in a loop of its own: a back-off window lasts seconds, and
	// when it ends between the two commands the node shows a new, pending pod instead.
	var detail string
	err := wait.PollUntilContextTimeout(context.Background(), pollInterval, waitTimeout, true, func(context.Context) (bool, error) {
		detail = mustEverynode(t, "explain", "agent", nodes[0], "-n", ns)
		return strings.Contains(detail, "failed pods here so far"), nil
	})
	if err != nil {
		t.Errorf("explain of node %s never showed the back-off; last:\n%s", nodes[0], detail)
	}
}
