package inspect

import (
	"context"
	"fmt"
	"time"

	apps "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/everynode/everynode/internal/daemon"
	"github.com/everynode/everynode/internal/gather"
)

// Explanation is daemon.Explain's report on one DaemonSet, with what it takes to
// show it to people.
type Explanation struct {
	DaemonSet *apps.DaemonSet
	Report    daemon.Report
	// Revisions maps the hash of each revision the DaemonSet controls to its number.
	Revisions map[string]int64
	// WaveKey is the node label of the waves ("" when the rollout has none).
	WaveKey string
	Now     time.Time
}

// Gather reads what the controller would look at for ds: every node, the pods and
// the ControllerRevisions of its namespace. The controller's in-flight writes and
// failed-pod back-offs are not visible from outside it, so they are left empty.
func Gather(ctx context.Context, client kubernetes.Interface, ds *apps.DaemonSet, now time.Time) (*daemon.Snapshot, error) {
	objs, err := gather.List(ctx, client, ds)
	if err != nil {
		return nil, apiError(err, ds.Namespace, ds.Name)
	}
	return gather.Snapshot(ds, objs, now, gather.Controller{}), nil
}

// Explain reads DaemonSet ns/name and what it depends on, and explains it.
func Explain(ctx context.Context, client kubernetes.Interface, ns, name string, now time.Time) (*Explanation, error) {
	ds, err := GetDaemonSet(ctx, client, ns, name)
	if err != nil {
		return nil, err
	}
	s, err := Gather(ctx, client, ds, now)
	if err != nil {
		return nil, err
	}
	return ExplainSnapshot(s), nil
}

// ExplainSnapshot explains a snapshot the caller gathered (from its caches, say).
func ExplainSnapshot(s *daemon.Snapshot) *Explanation {
	e := &Explanation{DaemonSet: s.DaemonSet, Report: daemon.Explain(s), Revisions: map[string]int64{}, Now: s.Now}
	e.WaveKey = e.Report.Policy.WaveKey
	for _, r := range s.Revisions {
		if h := r.Labels[daemon.HashLabel]; h != "" && metav1.IsControlledBy(r, s.DaemonSet) {
			e.Revisions[h] = r.Revision
		}
	}
	return e
}

// Node returns the report on one node.
func (e *Explanation) Node(name string) (daemon.NodeReport, error) {
	for _, n := range e.Report.Nodes {
		if n.Node == name {
			return n, nil
		}
	}
	return daemon.NodeReport{}, fmt.Errorf("node %q does not exist and runs no pod of daemonset/%s: list the nodes with `everynode kubectl get nodes`", name, e.DaemonSet.Name)
}
