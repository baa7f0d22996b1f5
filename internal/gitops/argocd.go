// Package gitops runs the health checks that GitOps tools apply to DaemonSets, as
// those tools run them, so that tests can hold everynode's status to what Argo CD,
// Flux and Helm will show. It owns nothing the controller needs.
package gitops

import (
	"context"
	"fmt"
	"io/fs"
	"time"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/everynode/everynode/charts"
)

// ArgoCDHealthScript is the chart's Argo CD health check for DaemonSets.
const ArgoCDHealthScript = "files/argocd-health.lua"

// Health is an Argo CD health: its status (Healthy, Progressing, Degraded,
// Suspended, Missing or Unknown) and message.
type Health struct {
	Status  string
	Message string
}

// ArgoCDHealth runs the chart's health check on obj (a typed object or an
// unstructured map) as Argo CD runs a check from argocd-cm by default.
func ArgoCDHealth(obj any) (Health, error) {
	script, err := fs.ReadFile(charts.Everynode(), ArgoCDHealthScript)
	if err != nil {
		return Health{}, err
	}
	u, ok := obj.(map[string]any)
	if !ok {
		if u, err = runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err != nil {
			return Health{}, err
		}
	}
	return RunArgoCDHealth(string(script), u)
}

// RunArgoCDHealth runs a health check script in Argo CD's Lua sandbox: a state with
// only the package, base and table libraries (Argo CD adds a safe subset of os,
// left out here: a check that needs it fails), a second to finish, obj decoded as
// Argo CD decodes it; the table returned must name a health status Argo CD knows.
func RunArgoCDHealth(script string, obj map[string]any) (Health, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), Protect: true}, lua.LString(lib.name)); err != nil {
			return Health{}, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", luaValue(l, obj))
	if err := l.DoString(script); err != nil {
		return Health{}, err
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return Health{}, fmt.Errorf("the health check returned %s, want a table", l.Get(-1).Type())
	}
	h := Health{Status: lua.LVAsString(ret.RawGetString("status")), Message: lua.LVAsString(ret.RawGetString("message"))}
	switch h.Status {
	case "Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown":
		return h, nil
	}
	return Health{}, fmt.Errorf("the health check returned the status %q, which Argo CD does not know", h.Status)
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
