package controller

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/everynode/everynode/internal/daemon"
)

// Controller tests of the order pod writes go out in (writequeue.go, dispatch.go):
// the client's rate limiter is a gate the test opens, so that the writes of several
// DaemonSets wait in the queue together, as they do behind a rate limit.

// cniDaemonSet is a network agent: system-node-critical, tolerating every taint.
func cniDaemonSet(name string) *apps.DaemonSet {
	ds := newDaemonSet(name)
	ds.Spec.Template.Spec.PriorityClassName = SystemNodeCritical
	ds.Spec.Template.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
	return ds
}

// writeLog records the pod writes the API server receives, in order: "create <app>"
// and "delete <pod name>".
type writeLog struct {
	mu     sync.Mutex
	writes []string
}

func (h *harness) logWrites() *writeLog {
	l := &writeLog{}
	h.prependReactor("*", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		var entry string
		switch {
		case a.GetVerb() == "create" && a.GetSubresource() == "":
			entry = "create " + a.(clienttesting.CreateAction).GetObject().(*v1.Pod).Labels["app"]
		case a.GetVerb() == "delete":
			entry = "delete " + a.(clienttesting.DeleteAction).GetName()
		default:
			return false, nil, nil
		}
		l.mu.Lock()
		l.writes = append(l.writes, entry)
		l.mu.Unlock()
		return false, nil, nil
	})
	return l
}

func (l *writeLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.writes...)
}

// waitQueued waits until n pod writes wait in the controller's queue.
func (h *harness) waitQueued(n int) {
	h.t.Helper()
	h.waitFor(fmt.Sprintf("%d pod writes queued", n), func() bool { return h.ctrl.writes.len() == n })
}

// A plain DaemonSet is synced first and its creates queued; then a network agent's.
// Once tokens come, every create of the agent goes out before any of the plain
// DaemonSet's, and each node gets one pod of each.
func TestController_CriticalCreatesOvertakeEarlierOnes(t *testing.T) {
	g := newGate()
	h := newHarness(t, harnessOptions{limiter: g, writers: 1})
	log := h.logWrites()
	nodes := h.createNodes("node", 6, nil)
	h.createDaemonSet(newDaemonSet("plain"))
	h.waitQueued(6)
	h.createDaemonSet(cniDaemonSet("cni"))
	h.waitQueued(12)
	g.open.Store(true)
	h.waitFor("both DaemonSets on every node", func() bool { return h.converged("plain", nodes) && h.converged("cni", nodes) })
	writes := log.get()
	want := strings.Repeat("create cni,", 6) + strings.Repeat("create plain,", 6)
	if got := strings.Join(writes, ",") + ","; got != want {
		t.Errorf("writes in order: %v, want the six creates of cni first", writes)
	}
}

// Two equal DaemonSets over many nodes take turns: at no point has one had more than
// two creates more than the other (DaemonSet by DaemonSet, one would be 8 ahead).
func TestController_EqualDaemonSetsTakeTurns(t *testing.T) {
	g := newGate()
	h := newHarness(t, harnessOptions{limiter: g, writers: 1})
	log := h.logWrites()
	nodes := h.createNodes("node", 8, nil)
	h.createDaemonSet(newDaemonSet("a"))
	h.createDaemonSet(newDaemonSet("b"))
	h.waitQueued(16)
	g.open.Store(true)
	h.waitFor("both DaemonSets on every node", func() bool { return h.converged("a", nodes) && h.converged("b", nodes) })
	lead := 0
	for i, w := range log.get() {
		switch w {
		case "create a":
			lead++
		case "create b":
			lead--
		}
		if lead > 2 || lead < -2 {
			t.Fatalf("after %d writes one DaemonSet leads by %d: %v", i+1, lead, log.get())
		}
	}
}

// A DaemonSet whose creates are all refused (ranked first, system-node-critical)
// does not hold up another: that one converges, while the refused one is retried
// with back-off, one create a try (slow start), not a create per node each time.
func TestController_FailingDaemonSetDoesNotHoldUpOthers(t *testing.T) {
	h := newHarness(t, harnessOptions{writers: 1})
	var refused atomic.Int32
	h.prependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.(clienttesting.CreateAction).GetObject().(*v1.Pod).Labels["app"] == "bad" {
			refused.Add(1)
			return true, nil, apierrors.NewForbidden(podsResource.GroupResource(), "", errors.New("exceeded quota"))
		}
		return false, nil, nil
	})
	nodes := h.createNodes("node", 10, nil)
	h.createDaemonSet(cniDaemonSet("bad"))
	h.createDaemonSet(newDaemonSet("good"))
	h.waitFor("the good DaemonSet on every node", func() bool { return h.converged("good", nodes) })
	time.Sleep(time.Second)
	n := refused.Load()
	t.Logf("%d creates of the failing DaemonSet refused", n)
	if n == 0 || n > 15 {
		t.Errorf("%d creates of the failing DaemonSet refused, want a few (one per try, tries backing off)", n)
	}
	if len(h.events(daemon.EventFailedCreate)) == 0 {
		t.Error("no FailedCreate event")
	}
	if pods := h.podsOf(h.daemonSet("bad")); len(pods) != 0 {
		t.Errorf("%d pods of the failing DaemonSet", len(pods))
	}
}

// With the pod watch a second behind and tokens trickling in, syncs keep deciding
// while creates wait in the queue, are sent, and are not yet seen: every node gets
// one pod of each DaemonSet, and no create is sent twice (the invariant watcher
// also fails the test if a node ever holds two).
func TestController_NoDuplicateCreatesWhileQueuedUnderCacheLag(t *testing.T) {
	g := newGate()
	h := newHarness(t, harnessOptions{limiter: g, writers: 2, podLag: time.Second})
	log := h.logWrites()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(15 * time.Millisecond):
				g.release(1)
			}
		}
	}()
	nodes := h.createNodes("node", 10, nil)
	h.createDaemonSet(newDaemonSet("plain"))
	h.createDaemonSet(cniDaemonSet("cni"))
	h.waitForWithin(20*time.Second, "both DaemonSets on every node", func() bool {
		return h.converged("plain", nodes) && h.converged("cni", nodes)
	})
	creates := 0
	for _, w := range log.get() {
		if strings.HasPrefix(w, "create ") {
			creates++
		}
	}
	if creates != 20 {
		t.Errorf("%d pod creates sent for 2 DaemonSets on 10 nodes, want 20", creates)
	}
}

// Creates waiting in the queue when the DaemonSet's next Plan no longer wants them
// are dropped: the node deleted meanwhile gets none, and the template changed
// meanwhile is the one every pod is made from.
func TestController_QueuedCreatesANewerPlanDropsAreNotSent(t *testing.T) {
	g := newGate()
	h := newHarness(t, harnessOptions{limiter: g, writers: 1})
	nodes := h.createNodes("node", 4, nil)
	h.createDaemonSet(newDaemonSet("agent"))
	h.waitQueued(4)
	if err := h.client.CoreV1().Nodes().Delete(h.ctx, "node-3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.changeTemplate("agent", imageV2)
	h.waitFor("the queue to hold the v2 creates of the three nodes left", func() bool {
		return queuedImages(h.ctrl.writes, testNamespace+"/agent") == "example.com/agent:v2 x3"
	})
	g.open.Store(true)
	h.waitFor("one v2 pod on each node left", func() bool {
		return h.converged("agent", nodes[:3]) && h.podsOf(h.daemonSet("agent"))[0].Spec.Containers[0].Image == "example.com/agent:v2"
	})
	created := h.api.CreatedPods()
	if len(created) != 3 {
		t.Errorf("%d pods created, want 3", len(created))
	}
	for _, pod := range created {
		if node := pinnedNode(t, pod); node == "node-3" || pod.Spec.Containers[0].Image != "example.com/agent:v2" {
			t.Errorf("pod %s created for %s with %s, want none for node-3 and every one v2", pod.Name, node, pod.Spec.Containers[0].Image)
		}
	}
}

// queuedImages describes the images of the creates queued for key, if they are all
// the same: "<image> x<count>".
func queuedImages(q *writeQueue, key string) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	d := q.byDS[key]
	if d == nil {
		return ""
	}
	images := map[string]int{}
	for _, l := range d.lanes {
		for _, w := range l.creates {
			images[w.template.Spec.Containers[0].Image]++
		}
	}
	if len(images) != 1 {
		return fmt.Sprint(images)
	}
	for image, n := range images {
		return fmt.Sprintf("%s x%d", image, n)
	}
	return ""
}

// Deletes follow the same order: a network agent's rolling update deletes its old
// pods before a plain DaemonSet's creates queued earlier go out.
func TestController_CriticalDeletesGoBeforePlainCreates(t *testing.T) {
	g := newGate()
	g.open.Store(true)
	h := newHarness(t, harnessOptions{limiter: g, writers: 1})
	nodes := h.createNodes("node", 3, nil)
	plain := newDaemonSet("plain")
	plain.Spec.Template.Spec.NodeSelector = map[string]string{"role": "x"}
	h.createDaemonSet(plain)
	cni := cniDaemonSet("cni")
	cni.Spec.UpdateStrategy = rollingUpdate(3, 0)
	h.createDaemonSet(cni)
	h.waitFor("the agent on every node", func() bool { return h.converged("cni", nodes) && h.converged("plain", nil) })

	g.open.Store(false)
	log := h.logWrites()
	for _, n := range nodes {
		h.updateNode(n, func(n *v1.Node) { n.Labels["role"] = "x" })
	}
	h.waitQueued(3)
	h.changeTemplate("cni", imageV2)
	h.waitQueued(6)
	g.open.Store(true)
	h.waitFor("both DaemonSets on every node", func() bool { return h.converged("plain", nodes) && h.converged("cni", nodes) })
	writes := log.get()
	if len(writes) < 6 {
		t.Fatalf("writes %v", writes)
	}
	for i, w := range writes[:3] {
		if !strings.HasPrefix(w, "delete cni-") {
			t.Errorf("write %d = %q, want the agent's deletes first: %v", i, w, writes)
		}
	}
}

// A DaemonSet naming a PriorityClass of the cluster ranks by its value: its creates
// go before those of a DaemonSet queued earlier without one.
func TestController_PriorityClassObjectsRank(t *testing.T) {
	g := newGate()
	h := newHarness(t, harnessOptions{limiter: g, writers: 1})
	if _, err := h.client.SchedulingV1().PriorityClasses().Create(h.ctx, &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: "agents"}, Value: 1000}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the PriorityClass cached", func() bool {
		_, err := h.ctrl.classes.Get("agents")
		return err == nil
	})
	log := h.logWrites()
	nodes := h.createNodes("node", 3, nil)
	h.createDaemonSet(newDaemonSet("plain"))
	h.waitQueued(3)
	agents := newDaemonSet("agents")
	agents.Spec.Template.Spec.PriorityClassName = "agents"
	h.createDaemonSet(agents)
	h.waitQueued(6)
	g.open.Store(true)
	h.waitFor("both DaemonSets on every node", func() bool { return h.converged("plain", nodes) && h.converged("agents", nodes) })
	want := strings.Repeat("create agents,", 3) + strings.Repeat("create plain,", 3)
	if got := strings.Join(log.get(), ",") + ","; got != want {
		t.Errorf("writes in order: %v, want the three creates of agents first", log.get())
	}
}

// Behind a real token bucket (10 requests a second) and the default number of
// dispatchers: a plain DaemonSet's creates are going out when a network agent is
// created; from the agent's first create on, its creates overtake the plain ones
// still queued. The agent's creates are queued in slow-start batches (1, 2, 4, 8,
// 5), and a plain create may take the token that comes while one batch is being
// answered and the next is not yet queued: at most one in each of the four gaps.
// Without the order, the 17 or so plain creates left would go out interleaved.
// The token comes every 100 ms, so the gap (an answer seen, a sync, the next batch
// queued) fits in it even on a slow machine and under the race detector.
func TestController_AgentOvertakesBehindTokenBucket(t *testing.T) {
	h := newHarness(t, harnessOptions{limiter: flowcontrol.NewTokenBucketRateLimiter(10, 1)})
	log := h.logWrites()
	nodes := h.createNodes("node", 20, nil)
	h.createDaemonSet(newDaemonSet("plain"))
	h.waitFor("the plain DaemonSet's first creates", func() bool { return len(log.get()) >= 3 })
	h.createDaemonSet(cniDaemonSet("cni"))
	h.waitForWithin(20*time.Second, "both DaemonSets on every node", func() bool {
		return h.converged("plain", nodes) && h.converged("cni", nodes)
	})
	writes := log.get()
	first, last := -1, -1
	for i, w := range writes {
		if w == "create cni" {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	slipped := 0
	for _, w := range writes[first:last] {
		if w == "create plain" {
			slipped++
		}
	}
	t.Logf("first agent create: write %d; plain creates slipped in: %d", first, slipped)
	if slipped > 4 || first > 20 {
		t.Errorf("%d plain creates went out between the agent's first (write %d) and last: %v", slipped, first, writes)
	}
}

// Creates queued while this replica leads and sent once its fence has closed are
// refused before they go out (as the fenced transport refuses them: reactors
// stand in for it here), and the DaemonSet waits with back-off, creating nothing;
// once the fence holds again it converges, one pod per node.
func TestController_QueuedWritesMeetTheFenceWhenSent(t *testing.T) {
	g := newGate()
	h := newHarness(t, harnessOptions{limiter: g, writers: 1})
	var fenced atomic.Bool
	var refused atomic.Int32
	h.prependReactor("*", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if fenced.Load() && a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			refused.Add(1)
			return true, nil, fmt.Errorf("%s pods: %w", a.GetVerb(), ErrNotLeading)
		}
		return false, nil, nil
	})
	nodes := h.createNodes("node", 4, nil)
	h.createDaemonSet(newDaemonSet("agent"))
	h.waitQueued(4)
	fenced.Store(true)
	g.open.Store(true)
	h.waitFor("a create refused by the fence", func() bool { return refused.Load() > 0 })
	time.Sleep(300 * time.Millisecond)
	if pods := h.podsOf(h.daemonSet("agent")); len(pods) != 0 {
		t.Fatalf("%d pods created past the fence", len(pods))
	}
	if n := refused.Load(); n > 10 {
		t.Errorf("%d creates tried past the fence in 300ms, want a few (slow start, back-off)", n)
	}
	fenced.Store(false)
	h.waitFor("one pod per node once the fence holds", func() bool { return h.converged("agent", nodes) })
	if n := len(h.api.CreatedPods()); n != 4 {
		t.Errorf("%d pods created, want 4", n)
	}
}
