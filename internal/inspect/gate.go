package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/everynode/everynode/internal/daemon"
)

// NodeGates is the node gate's answer for one node (daemon/nodegate.go): a verdict
// for each NoSchedule taint of the node that some DaemonSet gates on.
type NodeGates struct {
	Node     string               `json:"node"`
	Verdicts []daemon.GateVerdict `json:"gates"`
}

// ExplainNodeGates decides, as the controller does, each gate on the node: it reads
// the node, the DaemonSets of every namespace and the gating DaemonSets' pods on it.
func ExplainNodeGates(ctx context.Context, client kubernetes.Interface, name string, now time.Time) (*NodeGates, error) {
	node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("node %q not found: list them with `everynode kubectl get nodes`", name)
		}
		return nil, apiError(err, "", "")
	}
	all, err := client.AppsV1().DaemonSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing DaemonSets in all namespaces, to find those gating node %s: %w", name, err)
	}
	byKey := map[string][]*apps.DaemonSet{}
	for i := range all.Items {
		ds := &all.Items[i]
		if g := daemon.ParseNodeGate(ds); g.Key != "" && ds.DeletionTimestamp == nil {
			byKey[g.Key] = append(byKey[g.Key], ds)
		}
	}
	out := &NodeGates{Node: name}
	for _, key := range daemon.GateKeys(node) {
		var members []daemon.GateMember
		for _, ds := range byKey[key] {
			pods, err := podsOnNode(ctx, client, ds, name)
			if err != nil {
				return nil, err
			}
			members = append(members, daemon.GateMember{DaemonSet: ds, Gate: daemon.ParseNodeGate(ds), Pods: pods})
		}
		if len(members) > 0 {
			out.Verdicts = append(out.Verdicts, daemon.DecideGate(node, key, members, now))
		}
	}
	return out, nil
}

// podsOnNode lists ds's pods bound to node.
func podsOnNode(ctx context.Context, client kubernetes.Interface, ds *apps.DaemonSet, node string) ([]*v1.Pod, error) {
	list, err := client.CoreV1().Pods(ds.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("listing the pods of node %s in namespace %s: %w", node, ds.Namespace, err)
	}
	var out []*v1.Pod
	for i := range list.Items {
		pod := &list.Items[i]
		if ref := metav1.GetControllerOfNoCopy(pod); ref != nil && ref.UID == ds.UID && pod.Spec.NodeName == node {
			out = append(out, pod)
		}
	}
	return out, nil
}

// WriteText prints each gate: whether its taint goes or stays and why, then what
// each gating DaemonSet says of the node.
func (g *NodeGates) WriteText(w io.Writer) error {
	if len(g.Verdicts) == 0 {
		_, err := fmt.Fprintf(w, "Node %s has no NoSchedule taint that a DaemonSet gates on (%s): no node gate holds it.\n", g.Node, daemon.AnnotationNodeGate)
		return err
	}
	for i, v := range g.Verdicts {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "Node gate %s:NoSchedule on node %s: %s [%s]\n", v.Key, g.Node, either(v.Open, "open", "closed"), v.Reason)
		fmt.Fprintf(w, "  %s\n", v.Message)
		members := slices.Clone(v.Members)
		slices.SortFunc(members, func(a, b daemon.GateMemberState) int { return strings.Compare(a.DaemonSet, b.DaemonSet) })
		for _, m := range members {
			fmt.Fprintf(w, "  %s: %s\n", m.DaemonSet, m.Detail)
		}
	}
	return nil
}

// WriteJSON prints the gates as JSON.
func (g *NodeGates) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(g)
}
