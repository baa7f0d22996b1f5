package rolloutplan

import (
	"fmt"
	"slices"
	"strings"
	"time"

	apps "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/everynode/everynode/internal/daemon"
)

// mainWait picks, of what the nodes wait for, the one that holds the rollout.
func mainWait(waiting map[daemon.Reason]int) daemon.Reason {
	for _, r := range daemon.WaitReasons() { // the most telling first
		if waiting[r] > 0 {
			return r
		}
	}
	for r := range waiting {
		return r
	}
	return ""
}

// waitMessage says what the rollout waits for, with the numbers of this DaemonSet.
func (r *run) waitMessage(reason daemon.Reason) string {
	ds := r.w.ds
	switch reason {
	case daemon.ReasonNewPodUnavailable:
		msg := fmt.Sprintf("new pods Ready (pod-start %s)", short(r.o.PodStart))
		if ds.Spec.MinReadySeconds > 0 {
			msg += fmt.Sprintf(" and available (minReadySeconds %d)", ds.Spec.MinReadySeconds)
		}
		return msg
	case daemon.ReasonNewPodBaking:
		return fmt.Sprintf("bake: new pods healthy for min-healthy %s", short(r.pol.MinHealthy))
	case daemon.ReasonWavePause:
		return fmt.Sprintf("wave-pause %s", short(r.pol.WavePause))
	case daemon.ReasonBudgetFull:
		return "room in " + r.budgetText()
	case daemon.ReasonLaterWave:
		return "an earlier wave to finish"
	case "":
		return "nothing"
	}
	return daemon.NodeReport{Waiting: reason}.WaitMessage()
}

// budgetText names the budget the update spends: maxSurge when it surges, else
// maxUnavailable (the max-unavailable annotation of an OnDelete DaemonSet), with the
// nodes a percentage comes to.
func (r *run) budgetText() string {
	s := r.w.ds.Spec.UpdateStrategy
	switch {
	case s.Type == apps.OnDeleteDaemonSetStrategyType && r.pol.MaxUnavailable != nil:
		return shortKey(daemon.AnnotationMaxUnavailable) + " " + r.scaled(r.pol.MaxUnavailable)
	case s.RollingUpdate == nil:
		return "maxUnavailable"
	case surges(r.w.ds):
		return "maxSurge " + r.scaled(s.RollingUpdate.MaxSurge)
	}
	return "maxUnavailable " + r.scaled(s.RollingUpdate.MaxUnavailable)
}

// scaled writes a budget value, "2", or "25% (10 nodes)" for a percentage.
func (r *run) scaled(v *intstr.IntOrString) string {
	if v == nil || v.Type == intstr.Int {
		return orZero(v)
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, r.s.Desired, true)
	if err != nil {
		return v.String()
	}
	return fmt.Sprintf("%s (%d nodes)", v.String(), n)
}

// describePolicy says, in a few lines, what shapes the rollout.
func describePolicy(ds *apps.DaemonSet, pol *daemon.Policy) []string {
	var out []string
	s := ds.Spec.UpdateStrategy
	switch {
	case s.Type == apps.OnDeleteDaemonSetStrategyType && pol.MaxUnavailable != nil:
		out = append(out, fmt.Sprintf("OnDelete, rolled out by everynode with %s %s", shortKey(daemon.AnnotationMaxUnavailable), pol.MaxUnavailable.String()))
	case s.Type == apps.OnDeleteDaemonSetStrategyType:
		out = append(out, "OnDelete")
	default:
		var surge, unavailable string
		if ru := s.RollingUpdate; ru != nil {
			surge, unavailable = orZero(ru.MaxSurge), orZero(ru.MaxUnavailable)
		}
		out = append(out, fmt.Sprintf("RollingUpdate maxUnavailable %s, maxSurge %s", unavailable, surge))
	}
	if ds.Spec.MinReadySeconds > 0 {
		out[0] += fmt.Sprintf(", minReadySeconds %d", ds.Spec.MinReadySeconds)
	}
	var ann []string
	for k, v := range ds.Annotations {
		if strings.HasPrefix(k, daemon.RolloutPrefix) {
			ann = append(ann, fmt.Sprintf("%s: %s", shortKey(k), v))
		}
	}
	if len(ann) > 0 {
		slices.Sort(ann)
		out = append(out, strings.Join(ann, "; "))
	}
	if pol.MinHealthy > 0 && ds.Annotations[daemon.AnnotationMinHealthy] == "" {
		out = append(out, fmt.Sprintf("min-healthy bake %s (the default with max-restarts, progress-deadline or on-failure)", short(pol.MinHealthy)))
	}
	for _, p := range pol.Problems {
		out = append(out, "invalid: "+p)
	}
	return out
}

// notes are what the estimate does not model for this DaemonSet.
func notes(ds *apps.DaemonSet) []string {
	var out []string
	if surges(ds) && daemon.HasHostPorts(&ds.Spec.Template.Spec) {
		out = append(out, "the pods take host ports: a surge pod cannot be scheduled beside the old pod holding them, "+
			"which this estimate does not show (see surge-fallback in docs/rollouts.md)")
	}
	return out
}

// surges reports whether a RollingUpdate of ds creates new pods beside old ones.
func surges(ds *apps.DaemonSet) bool {
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type != apps.RollingUpdateDaemonSetStrategyType || ru == nil || ru.MaxSurge == nil {
		return false
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxSurge, 100, true)
	return err == nil && n > 0
}

func orZero(v *intstr.IntOrString) string {
	if v == nil {
		return "0"
	}
	return v.String()
}

// shortKey is an annotation's name without the rollout prefix.
func shortKey(k string) string { return strings.TrimPrefix(k, daemon.RolloutPrefix) }

// short writes a duration as 1m, 1m30s or 1h5m, dropping zero seconds and minutes.
func short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
