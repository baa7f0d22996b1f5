package daemon

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Rollout annotations: set on a DaemonSet, they shape how a RollingUpdate proceeds.
// docs/rollouts.md explains each with an example.
const (
	RolloutPrefix = "rollout.everynode.dev/"

	AnnotationPaused           = RolloutPrefix + "paused"
	AnnotationPartition        = RolloutPrefix + "partition"
	AnnotationCanary           = RolloutPrefix + "canary"
	AnnotationWaves            = RolloutPrefix + "waves"
	AnnotationWaveOrder        = RolloutPrefix + "wave-order"
	AnnotationWavePause        = RolloutPrefix + "wave-pause"
	AnnotationNewNodes         = RolloutPrefix + "new-nodes"
	AnnotationProgressDeadline = RolloutPrefix + "progress-deadline"
	AnnotationMaxRestarts      = RolloutPrefix + "max-restarts"
	AnnotationOnFailure        = RolloutPrefix + "on-failure"
	// AnnotationMaxUnavailable is the budget of an OnDelete DaemonSet's update, which
	// spec.updateStrategy has no field for: with it, everynode rolls the update out
	// (deleting old pods in turn) instead of waiting for someone to delete them.
	AnnotationMaxUnavailable = RolloutPrefix + "max-unavailable"
	// AnnotationMinHealthy is the healthy-time bake: how long a new pod must stay
	// Ready, with no container restart, before the update counts it done.
	AnnotationMinHealthy = RolloutPrefix + "min-healthy"
	// AnnotationSurgeFallback says what a surge update does on a node where the
	// scheduler cannot place the surge pod because the old pod holds its host port:
	// "delete-first" replaces such nodes old pod first, one node at a time.
	AnnotationSurgeFallback = RolloutPrefix + "surge-fallback"
	// AnnotationSickNodes: "exempt" leaves sick nodes out of the rollout until they
	// recover (sicknodes.go); "count", the default, counts their pods as unavailable.
	AnnotationSickNodes = RolloutPrefix + "sick-nodes"
	// AnnotationSickNodeGrace: how long a node may be NotReady before it is sick.
	AnnotationSickNodeGrace = RolloutPrefix + "sick-node-grace"
)

// DefaultMinHealthy is the bake when max-restarts, progress-deadline or on-failure is
// set and min-healthy is not (no more than half the progress deadline, so a healthy
// release can meet it); without those annotations there is none, as upstream.
const DefaultMinHealthy = 10 * time.Second

// Marks the controller keeps on ControllerRevisions, so that what a rollout learned
// survives a restart.
const (
	// MarkAvailable records when every pod of the revision was first seen available.
	MarkAvailable = RolloutPrefix + "available-at"
	// MarkFailed records that the revision's rollout failed, as
	// "<revision number> <reason>: <message>". It holds the rollout only while the
	// revision keeps that number: a template changed away and back is renumbered,
	// and tried again.
	MarkFailed = RolloutPrefix + "failed"
	// MarkRestored records that a rollback restored the revision, as
	// "<revision number> from <failed revision number> at <RFC 3339 time>"; the
	// rollback also removes the revision's MarkAvailable. Until it is available
	// everywhere again (MarkAvailable set anew), its rollout is watched for failure
	// as a new one's, and a failure holds it instead of rolling back again.
	MarkRestored = RolloutPrefix + "restored"
)

// Values of the new-nodes and on-failure annotations.
const (
	NewNodesUpdate    = "update"
	NewNodesStable    = "stable"
	OnFailurePause    = "pause"
	OnFailureRollback = "rollback"
	SurgeDeleteFirst  = "delete-first"
)

// Policy is a DaemonSet's rollout annotations, parsed. The zero Policy is upstream's
// RollingUpdate: nothing held, nothing watched.
type Policy struct {
	// Set: at least one rollout annotation is present; only then does the controller
	// keep the Progressing condition.
	Set       bool
	Paused    bool
	Partition *intstr.IntOrString // nodes that stay on older revisions; nil for none
	Canary    labels.Selector     // nil: every node may be updated
	WaveKey   string              // node label whose values are the waves; "" for none
	WaveOrder []string            // the waves to take first, in this order
	WavePause time.Duration       // bake time between waves
	// StableNewNodes: a node that joins mid-rollout gets the stable revision.
	StableNewNodes bool
	// ProgressDeadline: zero for none.
	ProgressDeadline time.Duration
	// MaxRestarts: negative for no limit.
	MaxRestarts int64
	Rollback    bool // on failure, roll back rather than pause
	// MaxUnavailable is the update budget of an OnDelete DaemonSet; nil for none.
	MaxUnavailable *intstr.IntOrString
	// MinHealthy is the healthy-time bake; zero for none.
	MinHealthy time.Duration
	// SurgeDeleteFirst: a node whose surge pod cannot be scheduled for a host port
	// its old pod holds is replaced old pod first (see hostport.go).
	SurgeDeleteFirst bool
	// InPlace: old pods whose revision differs only in images and added tolerations
	// are updated in place (see inplace.go).
	InPlace bool
	// ExemptSick: sick nodes are left out of the rollout until they recover, after
	// SickGrace for a node that is only NotReady (see sicknodes.go).
	ExemptSick bool
	SickGrace  time.Duration
	// Problems are the annotations that could not be parsed: while there is one, the
	// rollout holds.
	Problems []string
}

// ParsePolicy reads the rollout annotations. Each invalid one adds a Problem that
// names it, says what is wrong and how to fix it; the other annotations still apply.
func ParsePolicy(annotations map[string]string) Policy {
	p := Policy{MaxRestarts: -1}
	var keys []string
	for k := range annotations {
		if strings.HasPrefix(k, RolloutPrefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		p.Set = true
		if err := p.parse(k, strings.TrimSpace(annotations[k])); err != nil {
			p.Problems = append(p.Problems, fmt.Sprintf("annotation %s=%q: %v", k, annotations[k], err))
		}
	}
	if _, set := annotations[AnnotationMinHealthy]; !set && p.judgesFailure(annotations) {
		p.MinHealthy = DefaultMinHealthy
		if p.ProgressDeadline > 0 {
			p.MinHealthy = min(p.MinHealthy, p.ProgressDeadline/2)
		}
	}
	if p.ProgressDeadline > 0 && p.MinHealthy >= p.ProgressDeadline {
		p.Problems = append(p.Problems, fmt.Sprintf("annotation %s (%v) must be shorter than %s (%v): no release could meet the deadline",
			AnnotationMinHealthy, p.MinHealthy, AnnotationProgressDeadline, p.ProgressDeadline))
	}
	if _, set := annotations[AnnotationSickNodeGrace]; !set && p.ExemptSick {
		p.SickGrace = DefaultSickNodeGrace
	} else if set && !p.ExemptSick {
		p.Problems = append(p.Problems, fmt.Sprintf("annotation %s needs %s: %s to apply; add it, or remove the grace", AnnotationSickNodeGrace, AnnotationSickNodes, SickNodesExempt))
	}
	if len(p.WaveOrder) > 0 && p.WaveKey == "" {
		p.Problems = append(p.Problems, fmt.Sprintf("annotation %s needs %s to name the node label of the waves", AnnotationWaveOrder, AnnotationWaves))
	}
	return p
}

func (p *Policy) parse(key, val string) error {
	switch key {
	case AnnotationPaused:
		b, err := strconv.ParseBool(val)
		if err != nil {
			return fmt.Errorf(`want "true" or "false"`)
		}
		p.Paused = b
	case AnnotationPartition:
		v := intstr.Parse(val)
		n, err := intstr.GetScaledValueFromIntOrPercent(&v, 100, true)
		if err != nil || n < 0 || (v.Type == intstr.String && n > 100) {
			return fmt.Errorf("want a number of nodes (3) or a percentage of them (10%%)")
		}
		p.Partition = &v
	case AnnotationCanary:
		sel, err := labels.Parse(val)
		switch {
		case val == "":
			return fmt.Errorf("want a node label selector such as canary=true")
		case err != nil:
			return fmt.Errorf("want a node label selector such as canary=true (%v)", err)
		}
		p.Canary = sel
	case AnnotationWaves:
		if val == "" {
			return fmt.Errorf("want a node label key such as topology.kubernetes.io/zone")
		}
		p.WaveKey = val
	case AnnotationWaveOrder:
		for _, w := range strings.Split(val, ",") {
			if w = strings.TrimSpace(w); w != "" {
				p.WaveOrder = append(p.WaveOrder, w)
			}
		}
	case AnnotationWavePause:
		d, err := positiveDuration(val)
		if err != nil {
			return err
		}
		p.WavePause = d
	case AnnotationNewNodes:
		b, err := either(val, NewNodesUpdate, NewNodesStable, fmt.Errorf("want %q or %q", NewNodesUpdate, NewNodesStable))
		if err != nil {
			return err
		}
		p.StableNewNodes = b
	case AnnotationProgressDeadline:
		d, err := positiveDuration(val)
		if err != nil {
			return err
		}
		p.ProgressDeadline = d
	case AnnotationMaxRestarts:
		n, err := strconv.ParseInt(val, 10, 32)
		if err != nil || n < 0 {
			return fmt.Errorf("want a number of restarts, 0 or more")
		}
		p.MaxRestarts = n
	case AnnotationOnFailure:
		b, err := either(val, OnFailurePause, OnFailureRollback, fmt.Errorf("want %q or %q", OnFailurePause, OnFailureRollback))
		if err != nil {
			return err
		}
		p.Rollback = b
	case AnnotationMinHealthy:
		d, err := time.ParseDuration(val)
		if err != nil || d < 0 {
			return fmt.Errorf("want a duration such as 10s, or 0s for no bake")
		}
		p.MinHealthy = d
	case AnnotationSurgeFallback:
		if val != SurgeDeleteFirst {
			return fmt.Errorf("want %q (the only fallback)", SurgeDeleteFirst)
		}
		p.SurgeDeleteFirst = true
	case AnnotationInPlace:
		b, err := strconv.ParseBool(val)
		if err != nil {
			return fmt.Errorf(`want "true" or "false"`)
		}
		p.InPlace = b
	case AnnotationSickNodes:
		b, err := either(val, SickNodesCount, SickNodesExempt,
			fmt.Errorf("want %q (sick nodes' pods count as unavailable) or %q (sick nodes wait until they recover)", SickNodesCount, SickNodesExempt))
		if err != nil {
			return err
		}
		p.ExemptSick = b
	case AnnotationSickNodeGrace:
		d, err := time.ParseDuration(val)
		if err != nil || d < 0 {
			return fmt.Errorf("want a duration such as 1m, or 0s for none")
		}
		p.SickGrace = d
	case AnnotationMaxUnavailable:
		v := intstr.Parse(val)
		if err := validMaxUnavailable(v); err != nil {
			return err
		}
		p.MaxUnavailable = &v
	default:
		return fmt.Errorf("unknown rollout annotation; see docs/rollouts.md for the ones everynode reads")
	}
	return nil
}

// validMaxUnavailable checks a max-unavailable value as apps/v1 checks a
// RollingUpdate's maxUnavailable when maxSurge is zero: a whole number or a
// percentage, not negative, at most 100%, and not zero (the update could never start).
func validMaxUnavailable(v intstr.IntOrString) error {
	const want = "want a number of nodes (1) or a percentage of the desired nodes (10%), more than zero"
	if v.Type == intstr.Int {
		if v.IntValue() < 1 {
			return fmt.Errorf("%s", want)
		}
		return nil
	}
	pct, found := strings.CutSuffix(v.StrVal, "%")
	n, err := strconv.Atoi(pct)
	switch {
	case !found || err != nil:
		return fmt.Errorf("%s", want)
	case n < 1 || n > 100:
		return fmt.Errorf("%s; a percentage must be between 1%% and 100%%", want)
	}
	return nil
}

// either reads an annotation that takes one of two values: false for no, true for
// yes, and want for anything else.
func either(val, no, yes string, want error) (bool, error) {
	switch val {
	case no:
		return false, nil
	case yes:
		return true, nil
	}
	return false, want
}

func positiveDuration(val string) (time.Duration, error) {
	d, err := time.ParseDuration(val)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("want a positive duration such as 90s or 10m")
	}
	return d, nil
}

// judgesFailure reports whether the annotations ask the rollout to judge a release:
// max-restarts, progress-deadline or on-failure.
func (p *Policy) judgesFailure(annotations map[string]string) bool {
	_, onFailure := annotations[AnnotationOnFailure]
	return p.MaxRestarts >= 0 || p.ProgressDeadline > 0 || onFailure
}

// watchesProgress reports whether failures are detected at all.
func (p *Policy) watchesProgress() bool { return p.ProgressDeadline > 0 || p.MaxRestarts >= 0 }

// PolicyReadsNodeHealth reports whether annotations make a rollout depend on node
// health (sick-nodes: exempt), so that a node falling sick or recovering wakes the
// DaemonSet even when none of its pods changes.
func PolicyReadsNodeHealth(annotations map[string]string) bool {
	return annotations[AnnotationSickNodes] == SickNodesExempt
}

// PolicyReadsNodeLabels reports whether annotations make a rollout depend on node
// labels (a canary selector or waves), so that a node relabelled wakes the DaemonSet
// even when its placement does not change.
func PolicyReadsNodeLabels(annotations map[string]string) bool {
	_, canary := annotations[AnnotationCanary]
	_, waves := annotations[AnnotationWaves]
	return canary || waves
}
