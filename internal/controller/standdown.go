package controller

import (
	"context"
	"fmt"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// ConditionControllerConflict is the DaemonSet condition full mode sets when another
// DaemonSet controller writes to the DaemonSet's pods or status.
const ConditionControllerConflict apps.DaemonSetConditionType = "ControllerConflict"

// Reason of ConditionControllerConflict and of its Warning event.
const ReasonControllerConflict = "ControllerConflict"

// standDown is a full-mode sync of a DaemonSet that another controller writes to:
// everynode writes nothing to it any more but, once, the condition and Warning event
// that say why and how to fix it. The first time this happens in the process, one
// error line says the same in the log.
func (c *Controller) standDown(ctx context.Context, ds *apps.DaemonSet, key string, w foreignWrite) error {
	if w.Reported {
		return nil
	}
	const fix = "turn kube-controller-manager's DaemonSet controller off (--controllers=*,-daemonset-controller) and restart everynode, or run everynode with --mode companion beside it"
	msg := fmt.Sprintf("another DaemonSet controller (field manager %q) %s, so everynode stopped writing to this DaemonSet to keep the two from fighting: %s",
		w.Manager, w.What, fix)
	cond := &apps.DaemonSetCondition{Type: ConditionControllerConflict, Status: v1.ConditionTrue, Reason: ReasonControllerConflict,
		Message: msg, LastTransitionTime: metav1.NewTime(c.clock.Now())}
	if err := c.writeConditions(ctx, ds, key, []apps.DaemonSetCondition{*cond}); err != nil {
		return err
	}
	c.recorder.Event(ds, v1.EventTypeWarning, ReasonControllerConflict, msg)
	c.foreign.reported(key)
	logger := klog.FromContext(ctx)
	c.standDownOnce.Do(func() {
		logger.Error(nil, "Another DaemonSet controller is writing to the DaemonSets everynode manages; everynode stops writing to each one it touches",
			"fix", fix, "fieldManager", w.Manager, "first", key)
	})
	logger.V(1).Info("Stopped writing to a DaemonSet another controller writes to", "fieldManager", w.Manager, "what", w.What)
	return nil
}
