// Package rolloutplan estimates how a DaemonSet's rollout will go, without touching
// the cluster: it plays the rollout out on an in-memory copy of the DaemonSet, its
// nodes, pods and ControllerRevisions, asking everynode's decision core
// (daemon.Decide) what to do at each moment, carrying the answer out in memory, and
// letting simulated time pass.
//
// It owns the simulation and the schedule it yields, and nothing else: every rollout
// rule — the budget, pause, partition, canary, waves, bake, deadline — is the core's,
// so the plan follows the rules the controller follows. It promises:
//   - Plan never modifies its Input and makes no API call; it reads no clock (the
//     start time is an Option) and has no randomness: the same Input and Options
//     always yield the same Schedule.
//   - The schedule assumes every pod is Ready Options.PodStart after it is created
//     and then stays Ready with no restart, that deleted pods are gone at once, and
//     that the controller sees every write at once. Real rollouts are slower.
package rolloutplan

import (
	"fmt"
	"slices"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/everynode/everynode/internal/daemon"
)

// Input is the cluster the plan starts from: the DaemonSet (with the template to roll
// out), every node, the pods and ControllerRevisions of its namespace.
type Input struct {
	DaemonSet *apps.DaemonSet
	Nodes     []*v1.Node
	Pods      []*v1.Pod
	Revisions []*apps.ControllerRevision
}

// Options shape the simulation.
type Options struct {
	// Start is the simulated time the plan begins at (the cluster's "now").
	Start time.Time
	// PodStart is how long a pod takes from its creation to Ready.
	PodStart time.Duration
	// MaxDecisions and MaxDuration bound the simulation: the plan stops following
	// the rollout after that many decisions of the core, or that much simulated time.
	// Zero means DefaultMaxDecisions and DefaultMaxDuration.
	MaxDecisions int
	MaxDuration  time.Duration
}

// Defaults of Options.
const (
	DefaultPodStart     = 5 * time.Second
	DefaultMaxDecisions = 200000
	DefaultMaxDuration  = 30 * 24 * time.Hour
	// decisionsPerMoment bounds the decisions made without time passing: each is
	// made because the one before wrote something, as the controller's watch would
	// bring it back.
	decisionsPerMoment = 50
)

// Validate says what is wrong with o, and how to fix it.
func (o *Options) Validate() error {
	switch {
	case o.PodStart < 0:
		return fmt.Errorf("--pod-start %v is negative: give how long a pod takes to become Ready, such as 5s", o.PodStart)
	case o.MaxDecisions < 0, o.MaxDuration < 0:
		return fmt.Errorf("the simulation's limits must not be negative")
	}
	return nil
}

// Plan plays the rollout of in.DaemonSet's template out and returns its schedule.
func Plan(in Input, o Options) (*Schedule, error) {
	if in.DaemonSet == nil {
		return nil, fmt.Errorf("no DaemonSet to plan")
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.MaxDecisions == 0 {
		o.MaxDecisions = DefaultMaxDecisions
	}
	if o.MaxDuration == 0 {
		o.MaxDuration = DefaultMaxDuration
	}
	w := newWorld(in, o.Start, o.PodStart)
	r := &run{w: w, o: o, begun: map[string]bool{}, pol: daemon.PolicyOf(w.ds)}
	r.s = &Schedule{DaemonSet: w.ds.Namespace + "/" + w.ds.Name, PodStart: Duration(o.PodStart), WaveKey: r.pol.WaveKey,
		Policy: describePolicy(w.ds, &r.pol), Notes: notes(w.ds)}
	r.play()
	return r.s, nil
}

// run is one simulation in progress.
type run struct {
	w     *world
	o     Options
	pol   daemon.Policy
	s     *Schedule
	begun map[string]bool // nodes whose update has begun
	gap   []Wait          // what the rollout waited for since the last step
	hash  string
}

// play decides, applies and lets time pass until the rollout ends or a limit is hit.
func (r *run) play() {
	w := r.w
	for moment := 0; ; {
		if r.s.Decisions >= r.o.MaxDecisions {
			r.end(End{State: Limit, Reason: "DecisionLimit",
				Message: fmt.Sprintf("stopped following the rollout after %d decisions", r.s.Decisions)})
			return
		}
		p := daemon.Decide(w.snapshot())
		r.s.Decisions++
		if r.hash == "" && p.Hash != "" {
			r.begin(p.Hash) // the first decision that names the current revision
		}
		if e, ok := invalidSpec(p); ok {
			r.end(e)
			return
		}
		r.record(p)
		w.apply(p)
		if p.Rollback != nil {
			r.end(r.rolledBack(p))
			return
		}
		if moment++; p.Writes() > 0 {
			if moment >= decisionsPerMoment {
				r.end(End{State: Limit, Reason: "NoSettle", Message: "the decisions kept writing without time passing"})
				return
			}
			continue // the controller's watch brings it back at once
		}
		if e, done := r.settled(p); done {
			r.end(e)
			return
		}
		r.wait(p)
		next := w.nextReady()
		if at := w.now.Add(p.RequeueAfter); p.RequeueAfter > 0 && (next.IsZero() || at.Before(next)) {
			next = at
		}
		if next.Sub(r.o.Start) > r.o.MaxDuration {
			r.end(End{State: Limit, Reason: "TimeLimit",
				Message: fmt.Sprintf("stopped following the rollout after %v of simulated time", r.o.MaxDuration)})
			return
		}
		w.now, moment = next, 0
		w.ripen()
	}
}

// begin notes the revisions the rollout goes from and to, once the core has named
// the current one.
func (r *run) begin(hash string) {
	r.hash = hash
	r.s.ToHash = hash
	from := map[int64]bool{}
	for _, pod := range r.w.owned() {
		if h := pod.Labels[daemon.HashLabel]; h != hash {
			if n := r.w.revisionNumber(h); n > 0 && !from[n] {
				from[n] = true
				r.s.FromRevisions = append(r.s.FromRevisions, n)
			}
		}
	}
	slices.Sort(r.s.FromRevisions)
	desired, updated := r.w.count(hash)
	r.s.Desired, r.s.ToUpdate = desired, desired-updated
}

// record adds to the schedule the nodes whose update p begins, and the nodes p gives
// a first pod.
func (r *run) record(p daemon.Plan) {
	var nodes []string
	for _, d := range p.Deletes {
		switch d.Reason {
		case daemon.ReasonUpdate, daemon.ReasonSurgeDeleteFirst:
			node, _ := daemon.TargetNode(d.Pod)
			nodes = append(nodes, node)
		}
	}
	for _, u := range p.Updates {
		node, _ := daemon.TargetNode(u.Pod)
		nodes = append(nodes, node)
	}
	var placed []Placement
	for _, c := range p.Creates {
		switch {
		case c.Reason == daemon.ReasonSurge:
			nodes = append(nodes, c.Node)
		case !r.begun[c.Node]:
			placed = append(placed, Placement{Node: c.Node, Stable: c.Template != nil, Reason: string(c.Reason)})
		}
	}
	nodes = slices.DeleteFunc(nodes, func(n string) bool { return r.begun[n] })
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	if len(nodes) == 0 && len(placed) == 0 {
		return
	}
	step := r.step()
	for _, n := range nodes {
		r.begun[n] = true
		step.Nodes = append(step.Nodes, n)
		if wave := r.wave(n); r.pol.WaveKey != "" && !slices.Contains(step.Waves, wave) {
			step.Waves = append(step.Waves, wave)
		}
	}
	step.Placed = append(step.Placed, placed...)
}

// step is the schedule's step at the current moment, started if there is none yet.
func (r *run) step() *Step {
	at := Duration(r.w.now.Sub(r.o.Start))
	if n := len(r.s.Steps); n > 0 && r.s.Steps[n-1].At == at {
		return &r.s.Steps[n-1]
	}
	r.closeGap()
	r.s.Steps = append(r.s.Steps, Step{At: at})
	return &r.s.Steps[len(r.s.Steps)-1]
}

// closeGap gives the last step what the rollout waited for since.
func (r *run) closeGap() {
	if n := len(r.s.Steps); n > 0 {
		r.s.Steps[n-1].Then = r.gap
	}
	r.gap = nil
}

// wait notes what a settled decision leaves the rollout waiting for.
func (r *run) wait(p daemon.Plan) {
	reason := mainWait(p.Waiting)
	if reason == "" || len(r.s.Steps) == 0 {
		return
	}
	if n := len(r.gap); n > 0 && r.gap[n-1].Reason == string(reason) {
		return
	}
	msg := r.waitMessage(reason)
	if p.Waiting[daemon.ReasonBudgetFull] > 0 && reason != daemon.ReasonBudgetFull {
		msg = r.budgetText() + " used: " + msg
	}
	r.gap = append(r.gap, Wait{Reason: string(reason), Message: msg})
}

func (r *run) wave(node string) string {
	for _, n := range r.w.nodes {
		if n.Name == node {
			return n.Labels[r.pol.WaveKey]
		}
	}
	return ""
}

// end closes the schedule with e at the current moment.
func (r *run) end(e End) {
	r.closeGap()
	e.At = Duration(r.w.now.Sub(r.o.Start))
	e.Desired, e.Updated = r.w.count(r.hash)
	r.s.End = e
	r.s.ToRevision = r.w.revisionNumber(r.hash)
}
