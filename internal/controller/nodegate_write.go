package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/everynode/everynode/internal/daemon"
)

// The node gate's writes.

// jsonPatchOp is one operation of a JSON patch (RFC 6902).
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// removeTaints removes node's NoSchedule taints of keys, as the cache shows them, in
// one patch. Each removal is preceded by a test that the taint is still where the
// cache saw it, so a node whose taints changed since (another controller's write) is
// refused whole instead of losing the wrong taint; the refusal is retried from the
// newer cache.
func (g *nodeGate) removeTaints(ctx context.Context, node *v1.Node, keys []string) error {
	var at []int
	for _, key := range keys {
		at = append(at, daemon.GateTaints(node, key)...)
	}
	if len(at) == 0 {
		return nil
	}
	slices.SortFunc(at, func(a, b int) int { return b - a })
	ops := make([]jsonPatchOp, 0, 2*len(at))
	for _, i := range at { // last first, so the indexes stay right
		path := fmt.Sprintf("/spec/taints/%d", i)
		ops = append(ops, jsonPatchOp{Op: "test", Path: path, Value: node.Spec.Taints[i]}, jsonPatchOp{Op: "remove", Path: path})
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	// The node waits for this write, and everything bound for it with the node:
	// it goes out with the next token, before the queued pod writes.
	if g.token != nil && g.token() {
		ctx = withPrepaid(ctx)
	}
	_, err = g.client.CoreV1().Nodes().Patch(ctx, node.Name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: g.manager})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing taints %v from node %s: %w", keys, node.Name, err)
	}
	return nil
}

// patchCondition sets or removes (cond carries "$patch": "delete") ds's
// NodeGateFailure condition, by a strategic merge patch of its status that leaves
// the other conditions alone.
func (g *nodeGate) patchCondition(ctx context.Context, ds *apps.DaemonSet, cond map[string]any) error {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []any{cond}}})
	if err != nil {
		return err
	}
	_, err = g.client.AppsV1().DaemonSets(ds.Namespace).Patch(ctx, ds.Name, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{FieldManager: g.manager}, "status")
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("setting the %s condition of daemonset %s/%s: %w", daemon.ConditionNodeGate, ds.Namespace, ds.Name, err)
	}
	return nil
}
