package controller

import (
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/everynode/everynode/internal/daemon"
)

// The pod cache holds of a pod another kind of controller owns only its metadata
// (cachedPod), even when it matches a DaemonSet's selector; of the DaemonSet's pods
// what the decisions read (daemon.SlimPod). The DaemonSet is served as if the caches
// held whole pods.
func TestController_CachesSlimPods(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	nodes := h.createNodes("node", 2, nil)
	ds := h.createDaemonSet(newDaemonSet("agent"))
	h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })

	web, err := h.client.CoreV1().Pods(testNamespace).Create(h.ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: testNamespace,
			Labels:          map[string]string{"app": "agent"}, // the DaemonSet's selector
			Annotations:     map[string]string{"example.com/note": "big"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs-uid", Controller: new(true)}}},
		Spec: v1.PodSpec{NodeName: "node-0", Containers: []v1.Container{{Name: "web", Image: "example.com/web:v1",
			Env: []v1.EnvVar{{Name: "MODE", Value: "serve"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cachedObj := h.cachedPod
	cached := func(name string) *v1.Pod {
		pod, _ := cachedObj(name).(*v1.Pod)
		return pod
	}
	h.waitFor("the ReplicaSet's pod in the cache", func() bool { return cachedObj(web.Name) != nil })

	got, ok := cachedObj(web.Name).(*metav1.PartialObjectMetadata)
	if !ok {
		t.Fatalf("cached ReplicaSet pod is a %T, want only its metadata", cachedObj(web.Name))
	}
	want := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: web.Name, Namespace: testNamespace, UID: web.UID,
			ResourceVersion: got.ResourceVersion, CreationTimestamp: web.CreationTimestamp, OwnerReferences: web.OwnerReferences}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cached ReplicaSet pod = %+v, want only its identity and controller", got)
	}
	if held := h.ctrl.podIndex.list(string(ds.UID), orphanKey(testNamespace)); len(held) != len(nodes) {
		t.Errorf("the pod index holds %d pods for the DaemonSet and the orphans, want its %d", len(held), len(nodes))
	}

	// The harness's kubelets have settled the pods: wait for the cache to show each
	// as stored, then compare.
	var pods []v1.Pod
	h.waitFor("the cache to show the DaemonSet's pods as stored", func() bool {
		pods = h.podsOf(ds)
		for i := range pods {
			if c := cached(pods[i].Name); c == nil || c.ResourceVersion != pods[i].ResourceVersion {
				return false
			}
		}
		return len(pods) == len(nodes)
	})
	for i := range pods {
		pod := &pods[i]
		c := cached(pod.Name)
		if !reflect.DeepEqual(c, daemon.SlimPod(pod)) {
			t.Errorf("cached pod %s = %+v, want daemon.SlimPod of the stored one", pod.Name, c)
		}
		if len(c.Spec.Containers) != 1 || c.Spec.Containers[0].Image != "" || c.Labels[daemon.HashLabel] == "" {
			t.Errorf("cached pod %s: containers %+v, labels %v; want the container's name only, and the labels",
				pod.Name, c.Spec.Containers, c.Labels)
		}
	}

	served := func() bool {
		s := h.daemonSet("agent").Status
		return h.converged("agent", nodes) && s.DesiredNumberScheduled == 2 && s.CurrentNumberScheduled == 2
	}
	h.holdsFor(300*time.Millisecond, "the DaemonSet served, the ReplicaSet's pod neither adopted nor counted", served)
	stored, err := h.client.CoreV1().Pods(testNamespace).Get(h.ctx, web.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(stored.OwnerReferences, web.OwnerReferences) {
		t.Errorf("the ReplicaSet's pod's owners = %+v, want unchanged", stored.OwnerReferences)
	}
}

// A pod whose controller changes moves between the cache's two forms, and the
// DaemonSet follows: its pod taken by a ReplicaSet is kept as metadata only, no
// longer counted, and replaced; released again, it is whole in the cache, an orphan
// the DaemonSet adopts, and the node ends with one of the DaemonSet's pods.
func TestController_FollowsAPodBetweenControllers(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	nodes := h.createNodes("node", 2, nil)
	ds := h.createDaemonSet(newDaemonSet("agent"))
	h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })
	cachedObj := h.cachedPod

	taken := h.podsByNode(ds)["node-0"][0]
	rs := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs-uid", Controller: new(true)}
	setOwners := func(owners []metav1.OwnerReference) {
		t.Helper()
		pod, err := h.client.CoreV1().Pods(testNamespace).Get(h.ctx, taken.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.OwnerReferences = owners
		if _, err := h.client.CoreV1().Pods(testNamespace).Update(h.ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setOwners([]metav1.OwnerReference{rs})
	h.waitFor("the taken pod cached as metadata", func() bool {
		_, partial := cachedObj(taken.Name).(*metav1.PartialObjectMetadata)
		return partial
	})
	h.waitForReplacement(ds, "node-0", taken.UID)
	for _, pod := range h.ctrl.podIndex.list(string(ds.UID), orphanKey(testNamespace)) {
		if pod.UID == taken.UID {
			t.Errorf("the pod index still holds %s, now a ReplicaSet's", taken.Name)
		}
	}
	if pod, err := h.client.CoreV1().Pods(testNamespace).Get(h.ctx, taken.Name, metav1.GetOptions{}); err != nil || pod.DeletionTimestamp != nil {
		t.Errorf("the ReplicaSet's pod was deleted (err %v): it was not the DaemonSet's to delete", err)
	}

	// Adopted back, it stands next to its replacement until the controller deletes
	// one of them: the user, not the controller, put two pods on node-0.
	h.inv.setLimits(ds.UID, podLimits{perNode: 2, doubled: 1, unavailable: -1})
	setOwners(nil)
	h.waitFor("the released pod whole in the cache and adopted", func() bool {
		pod, whole := cachedObj(taken.Name).(*v1.Pod)
		if !whole {
			return false
		}
		ref := metav1.GetControllerOfNoCopy(pod)
		return ref != nil && ref.UID == ds.UID
	})
	h.waitFor("one pod of the DaemonSet per node again", func() bool { return h.converged("agent", nodes) })
}

// cachedPod is what the controller's pod cache holds for the pod name of the test
// namespace: a *v1.Pod, a *metav1.PartialObjectMetadata, or nil.
func (h *harness) cachedPod(name string) any {
	obj, ok, err := h.ctrl.pods.GetByKey(testNamespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	return obj
}
