package controller

import (
	"time"

	apps "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/everynode/everynode/internal/daemon"
	"github.com/everynode/everynode/internal/inspect"
)

// builtinPlacement plays, in companion-mode tests, the cluster's own DaemonSet
// controller (kube-controller-manager's) for every DaemonSet: it sees each as a
// plain DaemonSet — without everynode's max-unavailable annotation, so an OnDelete one
// replaces no pod — runs the placement rules over it (everynode's own, which behave as
// that controller's) and writes what they plan: revisions, missing pods, pods to
// remove, and the status counters with a resourceVersion precondition, as that
// controller does. It counts its writes, so a test can tell them from everynode's.
type builtinPlacement struct {
	h *harness
	// podCreates and statusUpdates count the writes this stand-in attempted (the
	// fake API records every request, failed ones included).
	podCreates, statusUpdates int
}

// step runs one sync of every DaemonSet, from fresh reads of the fake API (as
// everynode explain reads a cluster).
func (b *builtinPlacement) step() {
	h := b.h
	dss, err := h.client.AppsV1().DaemonSets(testNamespace).List(h.ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := range dss.Items {
		ds := &dss.Items[i]
		plain := ds.DeepCopy()
		delete(plain.Annotations, daemon.AnnotationMaxUnavailable)
		s, err := inspect.Gather(h.ctx, h.client, plain, time.Now())
		if err != nil {
			return
		}
		b.apply(ds, daemon.Decide(s))
	}
}

// apply writes the placement part of p for ds.
func (b *builtinPlacement) apply(ds *apps.DaemonSet, p daemon.Plan) {
	h := b.h
	revisions := h.client.AppsV1().ControllerRevisions(ds.Namespace)
	if r := p.CreateRevision; r != nil {
		if _, err := revisions.Create(h.ctx, r, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return
		}
	}
	if r := p.RenumberRevision; r != nil {
		if _, err := revisions.Update(h.ctx, r, metav1.UpdateOptions{}); err != nil {
			return
		}
	}
	for _, c := range p.Creates {
		template := p.Template
		if c.Template != nil {
			template = c.Template
		}
		b.podCreates++
		_, _ = h.client.CoreV1().Pods(ds.Namespace).Create(h.ctx, daemon.PodForNode(ds, template, c.Node), metav1.CreateOptions{})
	}
	for _, d := range p.Deletes {
		_ = h.client.CoreV1().Pods(ds.Namespace).Delete(h.ctx, d.Pod.Name, preconditionUID(d.Pod.UID))
	}
	if p.Status != nil {
		next := ds.DeepCopy()
		next.Status = *p.Status
		b.statusUpdates++
		_, _ = h.client.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(h.ctx, next, metav1.UpdateOptions{})
	}
}
