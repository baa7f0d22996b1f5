package charts

import (
	"context"
	"fmt"
	"io/fs"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The chart's Argo CD health check (files/argocd-health.lua), run as Argo CD runs a
// health check from argocd-cm by default: a Lua state with only the package, base
// and table libraries (its safe os subset is left out here: the script needs none),
// a second to finish, and the object as Argo CD decodes it.

type health struct{ Status, Message string }

func argoHealth(t *testing.T, ds *apps.DaemonSet) health {
	t.Helper()
	script, err := fs.ReadFile(Everynode(), "files/argocd-health.lua")
	if err != nil {
		t.Fatal(err)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ds)
	if err != nil {
		t.Fatal(err)
	}
	h, err := runHealthLua(string(script), obj)
	if err != nil {
		t.Fatalf("the health check failed in Argo CD's sandbox: %v", err)
	}
	return h
}

func runHealthLua(script string, obj map[string]any) (health, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for name, open := range map[string]lua.LGFunction{lua.LoadLibName: lua.OpenPackage, lua.BaseLibName: lua.OpenBase, lua.TabLibName: lua.OpenTable} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(open), Protect: true}, lua.LString(name)); err != nil {
			return health{}, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", luaValue(l, obj))
	if err := l.DoString(script); err != nil {
		return health{}, err
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return health{}, fmt.Errorf("returned %s, want a table", l.Get(-1).Type())
	}
	h := health{Status: lua.LVAsString(ret.RawGetString("status")), Message: lua.LVAsString(ret.RawGetString("message"))}
	switch h.Status {
	case "Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown":
		return h, nil
	}
	return health{}, fmt.Errorf("returned the health status %q, which Argo CD does not know", h.Status)
}

// luaValue converts an unstructured object as Argo CD does: maps and lists to
// tables, every number to a Lua number.
func luaValue(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case bool:
		return lua.LBool(v)
	case string:
		return lua.LString(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case []any:
		t := l.CreateTable(len(v), 0)
		for _, x := range v {
			t.Append(luaValue(l, x))
		}
		return t
	case map[string]any:
		t := l.CreateTable(0, len(v))
		for k, x := range v {
			t.RawSetString(k, luaValue(l, x))
		}
		return t
	}
	return lua.LNil
}

// argoBuiltin is Argo CD's built-in DaemonSet health (gitops-engine,
// pkg/health/health_daemonset.go), the verdict the script must give for every
// DaemonSet whose rollout everynode does not drive.
func argoBuiltin(ds *apps.DaemonSet) health {
	s := ds.Status
	switch {
	case ds.Generation > s.ObservedGeneration:
		return health{"Progressing", "Waiting for rollout to finish: observed daemon set generation less than desired generation"}
	case ds.Spec.UpdateStrategy.Type == apps.OnDeleteDaemonSetStrategyType:
		return health{"Healthy", fmt.Sprintf("daemon set %d out of %d new pods have been updated", s.UpdatedNumberScheduled, s.DesiredNumberScheduled)}
	case s.UpdatedNumberScheduled < s.DesiredNumberScheduled:
		return health{"Progressing", fmt.Sprintf("Waiting for daemon set %q rollout to finish: %d out of %d new pods have been updated...", ds.Name, s.UpdatedNumberScheduled, s.DesiredNumberScheduled)}
	case s.NumberAvailable < s.DesiredNumberScheduled:
		return health{"Progressing", fmt.Sprintf("Waiting for daemon set %q rollout to finish: %d of %d updated pods are available...", ds.Name, s.NumberAvailable, s.DesiredNumberScheduled)}
	}
	return health{Status: "Healthy"}
}

func daemonSet(strategy apps.DaemonSetUpdateStrategyType, generation, observed int64, desired, updated, available int32, conds ...apps.DaemonSetCondition) *apps.DaemonSet {
	ds := &apps.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "node-agent", Namespace: "kube-system", Generation: generation},
		Spec:       apps.DaemonSetSpec{UpdateStrategy: apps.DaemonSetUpdateStrategy{Type: strategy}},
		Status: apps.DaemonSetStatus{ObservedGeneration: observed, DesiredNumberScheduled: desired, CurrentNumberScheduled: desired,
			UpdatedNumberScheduled: updated, NumberAvailable: available, NumberReady: available, Conditions: conds},
	}
	return ds
}

// Every DaemonSet everynode does not drive — no rollout annotations, or a
// Progressing condition alone as an older everynode left it — gets Argo CD's own
// verdict, status and message alike, across strategies, generations and counters.
func TestArgoHealth_UnmanagedIsArgosOwn(t *testing.T) {
	older := apps.DaemonSetCondition{Type: "Progressing", Status: v1.ConditionTrue, Reason: "RollingOut", Message: "rolling out revision 2"}
	n := 0
	for _, strategy := range []apps.DaemonSetUpdateStrategyType{apps.RollingUpdateDaemonSetStrategyType, apps.OnDeleteDaemonSetStrategyType} {
		for _, gen := range [][2]int64{{1, 1}, {3, 2}, {1, 0}} {
			for _, c := range [][3]int32{{0, 0, 0}, {5, 5, 5}, {5, 2, 5}, {5, 5, 3}, {5, 1, 2}, {5, 0, 0}} {
				for _, conds := range [][]apps.DaemonSetCondition{nil, {older}} {
					ds := daemonSet(strategy, gen[0], gen[1], c[0], c[1], c[2], conds...)
					got, want := argoHealth(t, ds), argoBuiltin(ds)
					if got != want {
						t.Errorf("%s, generation %v, counters %v, conditions %d: got %+v, want Argo CD's %+v", strategy, gen, c, len(conds), got, want)
					}
					n++
				}
			}
		}
	}
	t.Logf("%d DaemonSets compared", n)
}

// rollout is the three conditions everynode keeps, for a Progressing condition of
// that status and reason (the mapping internal/daemon/conditions.go makes).
func rollout(status v1.ConditionStatus, reason, message string) []apps.DaemonSetCondition {
	reconciling, stalled := v1.ConditionFalse, v1.ConditionFalse
	switch {
	case status == v1.ConditionFalse:
		stalled = v1.ConditionTrue
	case reason != "NewRevisionAvailable":
		reconciling = v1.ConditionTrue
	}
	return []apps.DaemonSetCondition{
		{Type: "Progressing", Status: status, Reason: reason, Message: message},
		{Type: "Reconciling", Status: reconciling, Reason: reason, Message: message},
		{Type: "Stalled", Status: stalled, Reason: reason, Message: message},
	}
}

// A DaemonSet everynode drives is read from its conditions, in both strategies
// (RollingUpdate in full mode, OnDelete in companion mode).
func TestArgoHealth_Managed(t *testing.T) {
	T, F, U := v1.ConditionTrue, v1.ConditionFalse, v1.ConditionUnknown
	failed := "revision 3 failed: ProgressDeadlineExceeded: no progress for 2m; the rollout holds until the template changes or `everynode rollout resume` runs"
	tests := []struct {
		name                    string
		generation, observed    int64
		desired, updated, avail int32
		conds                   []apps.DaemonSetCondition
		want                    health
	}{
		{name: "done", generation: 3, observed: 3, desired: 5, updated: 5, avail: 5,
			conds: rollout(T, "NewRevisionAvailable", "revision 3 is available on every node"),
			want:  health{"Healthy", "revision 3 is available on every node"}},
		{name: "rolling out", generation: 3, observed: 3, desired: 5, updated: 2, avail: 4,
			conds: rollout(T, "RollingOut", "rolling out revision 3"), want: health{"Progressing", "rolling out revision 3"}},
		{name: "rolling out, every pod updated, the last still baking", generation: 3, observed: 3, desired: 5, updated: 5, avail: 5,
			conds: rollout(T, "RollingOut", "rolling out revision 3"), want: health{"Progressing", "rolling out revision 3"}},
		{name: "between waves", generation: 3, observed: 3, desired: 5, updated: 2, avail: 5,
			conds: rollout(T, "WaitingForWave", "revision 3: wave zone=\"b\" starts at 2030-01-01T12:00:00Z, after the wave pause"),
			want:  health{"Progressing", "revision 3: wave zone=\"b\" starts at 2030-01-01T12:00:00Z, after the wave pause"}},
		{name: "paused", generation: 3, observed: 3, desired: 5, updated: 0, avail: 5,
			conds: rollout(U, "Paused", "revision 3 is paused"), want: health{"Suspended", "revision 3 is paused"}},
		{name: "canary waiting for promotion", generation: 3, observed: 3, desired: 5, updated: 1, avail: 5,
			conds: rollout(T, "WaitingForPromotion", "revision 3 runs on the canary nodes"), want: health{"Suspended", "revision 3 runs on the canary nodes"}},
		{name: "held by a partition", generation: 3, observed: 3, desired: 5, updated: 3, avail: 5,
			conds: rollout(T, "PartitionHeld", "2 nodes stay on older revisions"), want: health{"Suspended", "2 nodes stay on older revisions"}},
		{name: "failed", generation: 3, observed: 3, desired: 5, updated: 1, avail: 4,
			conds: rollout(F, "ProgressDeadlineExceeded", failed), want: health{"Degraded", failed}},
		{name: "rolled back", generation: 4, observed: 4, desired: 5, updated: 2, avail: 4,
			conds: rollout(F, "RolledBack", "revision 3 failed; rolled back"), want: health{"Degraded", "revision 3 failed; rolled back"}},
		{name: "an invalid annotation", generation: 3, observed: 3, desired: 5, updated: 5, avail: 5,
			conds: rollout(F, "InvalidAnnotation", "annotation rollout.everynode.dev/canary: bad"), want: health{"Degraded", "annotation rollout.everynode.dev/canary: bad"}},
		{name: "a new template not yet observed", generation: 4, observed: 3, desired: 5, updated: 5, avail: 5,
			conds: rollout(T, "NewRevisionAvailable", "revision 3 is available on every node"),
			want:  health{"Progressing", "Waiting for rollout to finish: observed daemon set generation less than desired generation"}},
		{name: "done as last seen, a new template counted by another controller", generation: 4, observed: 4, desired: 5, updated: 0, avail: 5,
			conds: rollout(T, "NewRevisionAvailable", "revision 3 is available on every node"),
			want:  health{"Progressing", "Waiting for everynode: 0 of 5 pods updated, 5 available"}},
		{name: "done, a node just joined", generation: 3, observed: 3, desired: 6, updated: 6, avail: 5,
			conds: rollout(T, "NewRevisionAvailable", "revision 3 is available on every node"),
			want:  health{"Progressing", "Waiting for everynode: 6 of 6 pods updated, 5 available"}},
	}
	for _, tt := range tests {
		for _, strategy := range []apps.DaemonSetUpdateStrategyType{apps.RollingUpdateDaemonSetStrategyType, apps.OnDeleteDaemonSetStrategyType} {
			t.Run(tt.name+"/"+string(strategy), func(t *testing.T) {
				ds := daemonSet(strategy, tt.generation, tt.observed, tt.desired, tt.updated, tt.avail, tt.conds...)
				if got := argoHealth(t, ds); got != tt.want {
					t.Errorf("got %+v, want %+v", got, tt.want)
				}
			})
		}
	}
}

// The sandbox above is Argo CD's: a script that used the string library would fail
// in it, and so does the health check on an object with nothing in it (it must
// not: Argo CD shows an error instead of a health).
func TestArgoHealth_Sandbox(t *testing.T) {
	if _, err := runHealthLua(`return { status = string.upper("healthy") }`, map[string]any{}); err == nil {
		t.Error("a script using the string library ran: the test's sandbox is not Argo CD's")
	}
	script, err := fs.ReadFile(Everynode(), "files/argocd-health.lua")
	if err != nil {
		t.Fatal(err)
	}
	h, err := runHealthLua(string(script), map[string]any{"apiVersion": "apps/v1", "kind": "DaemonSet"})
	if err != nil || h.Status != "Healthy" {
		t.Errorf("a DaemonSet with no metadata, spec or status: %+v, %v; want Argo CD's Healthy", h, err)
	}
}
