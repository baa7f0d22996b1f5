package e2e

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/everynode/everynode/internal/nodesim"
)

// A pod that failed is deleted and replaced on its node, with a Warning
// FailedDaemonPod event on the DaemonSet.
func TestFailedPodIsReplacedWithEvent(t *testing.T) {
	ns := newNamespace(t)
	nodes := newNodes(t, 1, map[string]string{"e2e/pool": ns})
	createDaemonSet(t, daemonSet(ns, "agent", map[string]string{"e2e/pool": ns}))
	waitRolledOut(t, ns, "agent", 1)
	failed := onePodPerNode(t, mustDaemonPods(t, ns, "agent"))[nodes[0]]

	// As a kubelet would report it.
	waitFor(t, "the pod's phase set to Failed", func(ctx context.Context) (bool, error) {
		pods, err := daemonPods(ctx, ns, "agent")
		if err != nil || len(pods[nodes[0]]) != 1 {
			return false, err
		}
		pod := pods[nodes[0]][0]
		pod.Status.Phase = v1.PodFailed
		_, err = env.client.CoreV1().Pods(ns).UpdateStatus(ctx, &pod, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	waitReplaced(t, ns, "agent", nodes[0], failed)
	waitRolledOut(t, ns, "agent", 1)

	ev := waitEvent(t, ns, "agent", "FailedDaemonPod")
	if ev.Type != v1.EventTypeWarning || !strings.Contains(ev.Message, nodes[0]) {
		t.Errorf("FailedDaemonPod event: type %s, message %q; want a Warning naming node %s", ev.Type, ev.Message, nodes[0])
	}
}

// A pod that exited successfully is deleted and replaced too, with a Normal
// SucceededDaemonPod event: a DaemonSet's pods are meant to run for ever.
func TestSucceededPodIsReplacedWithEvent(t *testing.T) {
	ns := newNamespace(t)
	nodes := newNodes(t, 1, map[string]string{"e2e/pool": ns})
	ds := daemonSet(ns, "oneshot", map[string]string{"e2e/pool": ns})
	ds.Spec.Template.Annotations = map[string]string{nodesim.AnnotationPhase: string(v1.PodSucceeded), nodesim.AnnotationReadyAfter: "1s"}
	createDaemonSet(t, ds)

	// The pod is Succeeded only for the moment the controller takes to notice, so
	// follow the first pod through a watch: it must succeed, then be deleted.
	var first *v1.Pod
	var rv string
	waitFor(t, "the first pod", func(ctx context.Context) (bool, error) {
		list, err := env.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=oneshot"})
		if err != nil || len(list.Items) == 0 {
			return false, err
		}
		first, rv = &list.Items[0], list.ResourceVersion
		return true, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	watcher, err := env.client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + first.Name, ResourceVersion: rv})
	if err != nil {
		t.Fatalf("watching pod %s: %v", first.Name, err)
	}
	succeeded, deleted := first.Status.Phase == v1.PodSucceeded, false
	for ev := range watcher.ResultChan() {
		pod, ok := ev.Object.(*v1.Pod)
		if !ok || pod.UID != first.UID {
			continue
		}
		succeeded = succeeded || pod.Status.Phase == v1.PodSucceeded
		if deleted = ev.Type == watch.Deleted; deleted {
			break
		}
	}
	watcher.Stop()
	if !deleted || !succeeded {
		t.Fatalf("pod %s: succeeded %t, deleted %t; want it to succeed, then be deleted", first.Name, succeeded, deleted)
	}
	waitReplaced(t, ns, "oneshot", nodes[0], first.UID)

	ev := waitEvent(t, ns, "oneshot", "SucceededDaemonPod")
	if ev.Type != v1.EventTypeNormal || !strings.Contains(ev.Message, nodes[0]) {
		t.Errorf("SucceededDaemonPod event: type %s, message %q; want Normal naming node %s", ev.Type, ev.Message, nodes[0])
	}
	// Stop the cycle of pods before the namespace goes.
	if err := env.client.AppsV1().DaemonSets(ns).Delete(context.Background(), "oneshot", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitReplaced waits until the pod old is gone and another of the DaemonSet's pods
// is on the node.
func waitReplaced(t *testing.T, ns, name, node string, old types.UID) {
	t.Helper()
	waitFor(t, "the pod to be replaced on "+node, func(ctx context.Context) (bool, error) {
		byNode, err := daemonPods(ctx, ns, name)
		if err != nil {
			return false, err
		}
		replaced := false
		for _, pod := range byNode[node] {
			if pod.UID == old {
				return false, nil
			}
			replaced = true
		}
		return replaced, nil
	})
}

// Deleting a DaemonSet with the default propagation lets the garbage collector
// remove its pods and its ControllerRevisions.
func TestDeletingDaemonSetDeletesItsPods(t *testing.T) {
	ns := newNamespace(t)
	newNodes(t, 2, map[string]string{"e2e/pool": ns})
	createDaemonSet(t, daemonSet(ns, "agent", map[string]string{"e2e/pool": ns}))
	waitRolledOut(t, ns, "agent", 2)
	if len(revisionHashes(t, ns, "agent")) == 0 {
		t.Fatalf("the DaemonSet has no ControllerRevision")
	}

	if err := env.client.AppsV1().DaemonSets(ns).Delete(context.Background(), "agent", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the DaemonSet: %v", err)
	}
	waitFor(t, "the pods and revisions to be collected", func(ctx context.Context) (bool, error) {
		pods, err := env.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		revs, err := env.client.AppsV1().ControllerRevisions(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 0 && len(revs.Items) == 0, nil
	})
	if out := kubectl(t, "get", "daemonsets,pods,controllerrevisions", "-n", ns, "-o", "name"); out != "" {
		t.Errorf("kubectl get lists %q after the deletion, want nothing", out)
	}
}
