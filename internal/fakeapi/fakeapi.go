// Package fakeapi gives client-go's fake clientset the API server behaviour a
// controller relies on, for the controller's tests and the benchmark's in-process
// scale model. The fake clientset stores objects as given; Install adds, through
// prepended reactors:
//   - create: generateName becomes a unique name; every object gets a UID, a
//     creationTimestamp and, for pods, a fresh Pending status;
//   - every write stamps a new metadata.resourceVersion (the informers' update
//     handlers compare them), and an update carrying a stale one is a Conflict;
//   - the status subresource of DaemonSets and pods writes only the status, and the
//     main resource only the rest;
//   - deletes honour DeleteOptions.Preconditions; a patch changing metadata.uid is
//     Invalid (so a UID in a patch acts as a precondition), one naming another
//     metadata.resourceVersion a Conflict; a template change in a DaemonSet patch
//     raises its generation;
//   - optionally, a seeded fraction of pod creates, pod deletes and DaemonSet status
//     updates fail with a 500, a Conflict or a ServerTimeout, storing nothing, or
//     with a Timeout, as the API server answers when it gives up waiting for a
//     write: then the write happens all the same.
//
// Deletes are immediate: there is no graceful termination.
package fakeapi

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/everynode/everynode/internal/daemon"
)

// The resources the controller's tests reach the tracker by.
var (
	PodsResource       = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	NodesResource      = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	DaemonSetsResource = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}
)

// Faults are the fractions of requests the fake API server fails, by kind, and the
// seed of the draws.
type Faults struct {
	PodCreate, PodDelete, StatusUpdate float64
	Seed                               int64
}

// API is the behaviour installed on one fake clientset.
type API struct {
	// Tracker is the clientset's store, for reading and writing past the reactors.
	Tracker clienttesting.ObjectTracker
	store   clienttesting.ReactionFunc // the store's reaction, behind semantics
	rv      atomic.Int64

	mu        sync.Mutex
	seq       int
	rngs      map[string]*rand.Rand // one sequence per request kind
	faults    Faults
	record    bool
	injected  map[string]int          // faults injected, by request kind
	created   []*v1.Pod               // every pod as stored at creation
	deletedAt map[types.UID]time.Time // when each pod was deleted
}

// Options are what Install adds beyond the API server's behaviour.
type Options struct {
	// Faults are the fractions of requests to fail, by kind.
	Faults Faults
	// Record keeps a copy of every pod created and when each pod was deleted, for
	// CreatedPods and DeletedTime; without it they find nothing.
	Record bool
}

// Install prepends the reactors to cs and returns the API they make.
func Install(cs *fake.Clientset, o Options) *API {
	f := o.Faults
	a := &API{
		record:    o.Record,
		Tracker:   cs.Tracker(),
		rngs:      map[string]*rand.Rand{},
		faults:    f,
		injected:  map[string]int{},
		deletedAt: map[types.UID]time.Time{},
	}
	a.rv.Store(1000)
	// Prepended reactors run last-prepended first: faults, then semantics, then the
	// store (which also stamps resource versions).
	a.store = clienttesting.ObjectReaction(&stampingTracker{ObjectTracker: cs.Tracker(), api: a})
	cs.PrependReactor("*", "*", a.store)
	cs.PrependReactor("*", "*", a.semantics)
	cs.PrependReactor("*", "*", a.inject)
	copyAddedOnWatches(cs)
	return a
}

func (a *API) inject(action clienttesting.Action) (bool, runtime.Object, error) {
	var rate float64
	var kind string
	switch {
	case action.Matches("create", "pods") && action.GetSubresource() == "":
		rate, kind = a.faults.PodCreate, "pod create"
	case action.Matches("delete", "pods"):
		rate, kind = a.faults.PodDelete, "pod delete"
	case action.Matches("update", "daemonsets") && action.GetSubresource() == "status":
		rate, kind = a.faults.StatusUpdate, "status update"
	default:
		return false, nil, nil
	}
	fault, ok := a.draw(kind, rate)
	if !ok {
		return false, nil, nil
	}
	gr := action.GetResource().GroupResource()
	cause := errors.New("injected fault")
	switch fault {
	case 0:
		return true, nil, apierrors.NewInternalError(cause)
	case 1:
		if kind == "status update" {
			// A real server answers Conflict only when a newer object exists, whose
			// watch event wakes the controller; the fake has none to send.
			return true, nil, apierrors.NewInternalError(cause)
		}
		return true, nil, apierrors.NewConflict(gr, "", cause)
	case 2:
		// The API server gave up waiting for the write, which went on all the same.
		if _, _, err := a.Handle(action); err != nil {
			return true, nil, err
		}
		return true, nil, apierrors.NewTimeoutError("injected fault", 1)
	default:
		return true, nil, apierrors.NewServerTimeout(gr, action.GetVerb(), 1)
	}
}

// draw decides whether a request of kind meets a fault, and which (0 to 3). Each
// kind draws from its own sequence, seeded from the seed and the kind, so the n-th
// request of a kind meets the same fault whatever order the controller's
// goroutines send requests of different kinds in.
func (a *API) draw(kind string, rate float64) (int, bool) {
	if rate == 0 {
		return 0, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	rng := a.rngs[kind]
	if rng == nil {
		h := fnv.New64a()
		h.Write([]byte(kind))
		rng = rand.New(rand.NewSource(a.faults.Seed ^ int64(h.Sum64())))
		a.rngs[kind] = rng
	}
	if rng.Float64() >= rate {
		return 0, false
	}
	a.injected[kind]++
	return rng.Intn(4), true
}

// NextResourceVersion stamps the next resource version, for an object a test stores
// past the reactors.
func (a *API) NextResourceVersion() string { return strconv.FormatInt(a.rv.Add(1), 10) }

// InjectedFaults counts the faults injected so far, by request kind.
func (a *API) InjectedFaults() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]int, len(a.injected))
	for k, v := range a.injected {
		out[k] = v
	}
	return out
}

// Handle does with action what the API does past its fault injection: a reactor
// prepended by a test can pass a request on and see the answer.
func (a *API) Handle(action clienttesting.Action) (bool, runtime.Object, error) {
	handled, obj, err := a.semantics(action)
	if !handled {
		handled, obj, err = a.store(action)
	}
	return handled, obj, err
}

func (a *API) semantics(action clienttesting.Action) (bool, runtime.Object, error) {
	switch act := action.(type) {
	case clienttesting.CreateActionImpl:
		if act.GetSubresource() == "" {
			return a.create(act)
		}
	case clienttesting.UpdateActionImpl:
		return a.update(act)
	case clienttesting.DeleteActionImpl:
		return a.delete(act)
	}
	return false, nil, nil
}

func (a *API) create(act clienttesting.CreateActionImpl) (bool, runtime.Object, error) {
	obj := act.GetObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return true, nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	if m.GetName() == "" && m.GetGenerateName() != "" {
		m.SetName(fmt.Sprintf("%s%05d", m.GetGenerateName(), a.seq))
	}
	if m.GetName() == "" {
		return true, nil, apierrors.NewBadRequest("name or generateName is required")
	}
	m.SetUID(uuid.NewUUID())
	m.SetCreationTimestamp(metav1.Now())
	if pod, ok := obj.(*v1.Pod); ok {
		pod.Status = v1.PodStatus{Phase: v1.PodPending}
		if a.record {
			a.created = append(a.created, pod.DeepCopy())
		}
	}
	return false, nil, nil
}

func (a *API) update(act clienttesting.UpdateActionImpl) (bool, runtime.Object, error) {
	obj := act.GetObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return true, nil, err
	}
	gr := act.GetResource().GroupResource()
	stored, err := a.Tracker.Get(act.GetResource(), act.GetNamespace(), m.GetName())
	if err != nil {
		return false, nil, nil // the store answers NotFound
	}
	sm, _ := meta.Accessor(stored)
	if rv := m.GetResourceVersion(); rv != "" && rv != sm.GetResourceVersion() {
		return true, nil, apierrors.NewConflict(gr, m.GetName(),
			errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	}
	m.SetUID(sm.GetUID())
	m.SetCreationTimestamp(sm.GetCreationTimestamp())
	status := act.GetSubresource() == "status"
	switch cur := obj.(type) {
	case *apps.DaemonSet:
		old := stored.(*apps.DaemonSet)
		if status {
			s := cur.Status
			*cur = *old
			cur.Status = s
		} else {
			cur.Status = old.Status
		}
	case *v1.Pod:
		old := stored.(*v1.Pod)
		if status {
			s := cur.Status
			*cur = *old
			cur.Status = s
		} else {
			cur.Status = old.Status
		}
	}
	return false, nil, nil
}

func (a *API) delete(act clienttesting.DeleteActionImpl) (bool, runtime.Object, error) {
	stored, err := a.Tracker.Get(act.GetResource(), act.GetNamespace(), act.GetName())
	if err != nil {
		return false, nil, nil // the store answers NotFound
	}
	sm, _ := meta.Accessor(stored)
	if p := act.GetDeleteOptions().Preconditions; p != nil {
		if p.UID != nil && *p.UID != sm.GetUID() {
			return true, nil, apierrors.NewConflict(act.GetResource().GroupResource(), act.GetName(),
				fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, sm.GetUID()))
		}
		if p.ResourceVersion != nil && *p.ResourceVersion != sm.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(act.GetResource().GroupResource(), act.GetName(),
				fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, sm.GetResourceVersion()))
		}
	}
	if a.record && act.GetResource() == PodsResource {
		a.mu.Lock()
		a.deletedAt[sm.GetUID()] = time.Now()
		a.mu.Unlock()
	}
	return false, nil, nil
}

// CreatedPods is every pod as stored at its creation (with Options.Record).
func (a *API) CreatedPods() []*v1.Pod {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*v1.Pod(nil), a.created...)
}

// DeletedTime is when the pod with uid was deleted (with Options.Record).
func (a *API) DeletedTime(uid types.UID) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.deletedAt[uid]
	return at, ok
}

// stampingTracker gives every stored object a new resourceVersion, and refuses a patch
// that would change an object's UID.
type stampingTracker struct {
	clienttesting.ObjectTracker
	api *API
}

func (s *stampingTracker) stamp(obj runtime.Object) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetResourceVersion(s.api.NextResourceVersion())
	}
}

func (s *stampingTracker) Create(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.CreateOptions) error {
	s.stamp(obj)
	return s.ObjectTracker.Create(gvr, obj, ns, opts...)
}

func (s *stampingTracker) Update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.UpdateOptions) error {
	s.stamp(obj)
	return s.ObjectTracker.Update(gvr, obj, ns, opts...)
}

func (s *stampingTracker) Patch(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	stored, err := s.ObjectTracker.Get(gvr, ns, m.GetName())
	if err != nil {
		return err
	}
	sm, _ := meta.Accessor(stored)
	if m.GetResourceVersion() != sm.GetResourceVersion() {
		// The patch named a resourceVersion, which is then a precondition.
		return apierrors.NewConflict(gvr.GroupResource(), m.GetName(),
			errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	}
	if sm.GetUID() != m.GetUID() {
		return apierrors.NewInvalid(schema.GroupKind{Group: gvr.Group, Kind: gvr.Resource}, m.GetName(), field.ErrorList{
			field.Invalid(field.NewPath("metadata", "uid"), m.GetUID(), "field is immutable"),
		})
	}
	// As the API server does, a template change bumps the DaemonSet's generation and
	// its template-generation annotation.
	if cur, ok := obj.(*apps.DaemonSet); ok && !apiequality.Semantic.DeepEqual(cur.Spec.Template, stored.(*apps.DaemonSet).Spec.Template) {
		cur.Generation++
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[daemon.TemplateGenerationAnnotation] = strconv.FormatInt(cur.Generation, 10)
	}
	s.stamp(obj)
	return s.ObjectTracker.Patch(gvr, obj, ns, opts...)
}
