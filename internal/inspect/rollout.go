package inspect

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apps "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/polymorphichelpers"

	"github.com/everynode/everynode/internal/daemon"
)

// Pause sets the paused annotation: no node is updated until Resume.
func Pause(ctx context.Context, client kubernetes.Interface, ns, name string) (string, error) {
	ds, err := GetDaemonSet(ctx, client, ns, name)
	if err != nil {
		return "", err
	}
	if ds.Annotations[daemon.AnnotationPaused] == "true" {
		return fmt.Sprintf("daemonset.apps/%s is already paused", name), nil
	}
	if err := patchAnnotations(ctx, client, ds, map[string]*string{daemon.AnnotationPaused: ptr("true")}); err != nil {
		return "", err
	}
	return fmt.Sprintf("daemonset.apps/%s paused", name), nil
}

// Resume removes the paused annotation and the failed mark of every revision the
// DaemonSet controls, so that a rollout held by a failure is tried again.
func Resume(ctx context.Context, client kubernetes.Interface, ns, name string) (string, error) {
	ds, err := GetDaemonSet(ctx, client, ns, name)
	if err != nil {
		return "", err
	}
	var did []string
	if _, ok := ds.Annotations[daemon.AnnotationPaused]; ok {
		if err := patchAnnotations(ctx, client, ds, map[string]*string{daemon.AnnotationPaused: nil}); err != nil {
			return "", err
		}
		did = append(did, "removed "+daemon.AnnotationPaused)
	}
	revs, err := controlledRevisions(ctx, client, ds)
	if err != nil {
		return "", err
	}
	for _, rev := range revs {
		if _, ok := rev.Annotations[daemon.MarkFailed]; !ok {
			continue
		}
		patch, _ := json.Marshal(annotationPatch(map[string]*string{daemon.MarkFailed: nil}))
		if _, err := client.AppsV1().ControllerRevisions(ns).Patch(ctx, rev.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return "", fmt.Errorf("clearing the failed mark of ControllerRevision %s/%s: %v", ns, rev.Name, err)
		}
		did = append(did, fmt.Sprintf("cleared the failure of revision %d", rev.Revision))
	}
	if len(did) == 0 {
		return fmt.Sprintf("daemonset.apps/%s is neither paused nor failed: nothing to resume", name), nil
	}
	return fmt.Sprintf("daemonset.apps/%s resumed (%s)", name, strings.Join(did, ", ")), nil
}

// Promote removes the canary and partition annotations, so that the rollout goes on
// to every node.
func Promote(ctx context.Context, client kubernetes.Interface, ns, name string) (string, error) {
	ds, err := GetDaemonSet(ctx, client, ns, name)
	if err != nil {
		return "", err
	}
	remove := map[string]*string{}
	var removed []string
	for _, k := range []string{daemon.AnnotationCanary, daemon.AnnotationPartition} {
		if _, ok := ds.Annotations[k]; ok {
			remove[k] = nil
			removed = append(removed, k)
		}
	}
	if len(remove) == 0 {
		return fmt.Sprintf("daemonset.apps/%s has no %s or %s annotation: nothing to promote", name, daemon.AnnotationCanary, daemon.AnnotationPartition), nil
	}
	if err := patchAnnotations(ctx, client, ds, remove); err != nil {
		return "", err
	}
	return fmt.Sprintf("daemonset.apps/%s promoted (removed %s)", name, strings.Join(removed, ", ")), nil
}

// Undo restores the template of revision toRevision (0: the one before the current),
// exactly as `kubectl rollout undo` does.
func Undo(ctx context.Context, client kubernetes.Interface, ns, name string, toRevision int64) (string, error) {
	ds, err := GetDaemonSet(ctx, client, ns, name)
	if err != nil {
		return "", err
	}
	rb, err := polymorphichelpers.RollbackerFor(schema.GroupKind{Group: apps.GroupName, Kind: "DaemonSet"}, client)
	if err != nil {
		return "", err
	}
	msg, err := rb.Rollback(ds, nil, toRevision, cmdutil.DryRunNone)
	if err != nil {
		return "", fmt.Errorf("%v: list the revisions with `everynode kubectl rollout history daemonset/%s -n %s`", err, name, ns)
	}
	return fmt.Sprintf("daemonset.apps/%s %s", name, msg), nil
}

// controlledRevisions lists the ControllerRevisions ds controls, oldest first.
func controlledRevisions(ctx context.Context, client kubernetes.Interface, ds *apps.DaemonSet) ([]*apps.ControllerRevision, error) {
	list, err := client.AppsV1().ControllerRevisions(ds.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, apiError(err, ds.Namespace, ds.Name)
	}
	var out []*apps.ControllerRevision
	for i := range list.Items {
		if metav1.IsControlledBy(&list.Items[i], ds) {
			out = append(out, &list.Items[i])
		}
	}
	slices.SortFunc(out, func(a, b *apps.ControllerRevision) int { return cmp.Compare(a.Revision, b.Revision) })
	return out, nil
}

// patchAnnotations sets (or, for nil values, removes) annotations on ds with a merge
// patch, which touches nothing else.
func patchAnnotations(ctx context.Context, client kubernetes.Interface, ds *apps.DaemonSet, set map[string]*string) error {
	patch, err := json.Marshal(annotationPatch(set))
	if err != nil {
		return err
	}
	if _, err := client.AppsV1().DaemonSets(ds.Namespace).Patch(ctx, ds.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return apiError(err, ds.Namespace, ds.Name)
	}
	return nil
}

func annotationPatch(set map[string]*string) map[string]any {
	return map[string]any{"metadata": map[string]any{"annotations": set}}
}

func ptr[T any](v T) *T { return &v }
