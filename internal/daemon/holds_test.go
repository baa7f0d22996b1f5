package daemon

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
)

// Rollout policy holds (paused, partition, canary, waves, wave-pause, invalid
// annotations) and how they combine with maxUnavailable and maxSurge. Each row starts
// from rolloutCluster (n1..n5, each running an available pod of the older revision)
// with the DaemonSet's history recorded, and checks the Plan, the Progressing
// condition it stores and what each node waits for.

// policyCluster is rolloutCluster with the DaemonSet's history: revision 1 records an
// older template (image img:v0) whose hash "old" the old pods carry, revision 2 the
// current template.
func policyCluster(ds *apps.DaemonSet, names ...string) *Snapshot {
	s := rolloutCluster(ds, names...)
	s.Revisions = []*apps.ControllerRevision{olderRevision(ds, "img:v0", "old", 1), currentRevision(ds, 2)}
	return s
}

// olderRevision records ds's template with another image, labelled with hash.
func olderRevision(ds *apps.DaemonSet, img, hash string, number int64) *apps.ControllerRevision {
	older := ds.DeepCopy()
	older.Spec.Template.Spec.Containers[0].Image = img
	return revision(ds, "ds-"+hash, hash, number, templatePatch(older))
}

func currentRevision(ds *apps.DaemonSet, number int64) *apps.ControllerRevision {
	return revision(ds, "ds-"+hashOf(ds), hashOf(ds), number, templatePatch(ds))
}

func templatePatch(ds *apps.DaemonSet) []byte {
	p, err := TemplatePatch(&ds.Spec.Template)
	if err != nil {
		panic(err)
	}
	return p
}

// label adds labels to the snapshot's nodes of those names.
func label(s *Snapshot, kv []string, names ...string) {
	for _, n := range s.Nodes {
		if slices.Contains(names, n.Name) {
			withLabels(kv...)(n)
		}
	}
}

// zones puts n1 and n3 in zone a, n2 and n4 in zone b; n5 has no zone.
func zones(s *Snapshot) {
	label(s, []string{"zone", "a"}, "n1", "n3")
	label(s, []string{"zone", "b"}, "n2", "n4")
}

// updated replaces the pods on nodes by available pods of the current revision.
func updated(ds *apps.DaemonSet, s *Snapshot, names ...string) {
	for _, n := range names {
		replace(s, newPod(ds, "new-"+n, n))
	}
}

// storedCondition is the Progressing condition once the Plan's status is stored.
func storedCondition(ds *apps.DaemonSet, p Plan) *apps.DaemonSetCondition {
	if p.Status != nil {
		return Progressing(p.Status)
	}
	return Progressing(&ds.Status)
}

// waits is what each node waits for, as Explain reports it; nodes waiting for
// nothing are left out.
func waits(s *Snapshot) map[string]Reason {
	out := map[string]Reason{}
	for _, n := range Explain(s).Nodes {
		if n.Waiting != "" {
			out[n.Node] = n.Waiting
		}
	}
	return out
}

// all maps every node n1..n5 but those given to r.
func all(r Reason, except ...string) map[string]Reason {
	out := map[string]Reason{}
	for _, n := range []string{"n1", "n2", "n3", "n4", "n5"} {
		if !slices.Contains(except, n) {
			out[n] = r
		}
	}
	return out
}

// with adds node waits to m.
func with(m map[string]Reason, kv ...string) map[string]Reason {
	for k, v := range kvMap(kv) {
		m[k] = Reason(v)
	}
	return m
}

type rolloutRow struct {
	name    string
	ds      []dsOpt
	setup   func(ds *apps.DaemonSet, s *Snapshot)
	creates []string
	deletes []string
	updates []string // pods updated in place, by name
	// stable maps the nodes whose create uses an older revision's template to that
	// revision's hash; every other create uses the current template.
	stable map[string]string
	// reason and status of the Progressing condition stored; not checked when
	// reason is empty.
	reason  Reason
	status  v1.ConditionStatus
	message string            // a part of the condition's message
	waits   map[string]Reason // nil: not checked
	requeue time.Duration
	// marks are the revision marks, each "<revision name> <key>=<value>"; a value
	// given shorter matches as a prefix.
	marks    []string
	rollback string   // the revision rolled back to, by name
	events   []string // the events' reasons; nil: not checked
}

func runRolloutRows(t *testing.T, rows []rolloutRow) {
	t.Helper()
	for _, tt := range rows {
		t.Run(tt.name, func(t *testing.T) {
			ds := newDS("ds", tt.ds...)
			s := policyCluster(ds)
			if tt.setup != nil {
				tt.setup(ds, s)
			}
			p := Decide(s)
			if got := createdOn(p); !slices.Equal(got, tt.creates) {
				t.Errorf("creates on %v, want %v", got, tt.creates)
			}
			if got := deletedNames(p); !slices.Equal(got, tt.deletes) {
				t.Errorf("deletes %v, want %v", got, tt.deletes)
			}
			if got := updatedNames(p); !slices.Equal(got, tt.updates) {
				t.Errorf("updates in place %v, want %v", got, tt.updates)
			}
			for _, c := range p.Creates {
				got := ""
				if c.Template != nil {
					got = c.Template.Labels[HashLabel]
				}
				if got != tt.stable[c.Node] {
					t.Errorf("create on %s from the template of revision %q, want %q", c.Node, got, tt.stable[c.Node])
				}
			}
			if len(p.Creates) > 0 && (p.Template == nil || p.Template.Labels[HashLabel] != hashOf(ds)) {
				t.Errorf("creates without the current template: %v", p.Template)
			}
			if p.RequeueAfter != tt.requeue {
				t.Errorf("RequeueAfter = %v, want %v", p.RequeueAfter, tt.requeue)
			}
			var marks []string
			for _, m := range p.MarkRevisions {
				if m.Remove {
					marks = append(marks, m.Revision.Name+" "+m.Key+"-") // as kubectl annotate removes one
				} else {
					marks = append(marks, m.Revision.Name+" "+m.Key+"="+m.Value)
				}
			}
			if len(marks) != len(tt.marks) || !slices.EqualFunc(marks, tt.marks, strings.HasPrefix) {
				t.Errorf("marks %q, want %q", marks, tt.marks)
			}
			rollback := ""
			if p.Rollback != nil {
				rollback = p.Rollback.Name
			}
			if rollback != tt.rollback {
				t.Errorf("rollback to %q, want %q", rollback, tt.rollback)
			}
			if got := eventReasons(p); tt.events != nil && !slices.Equal(got, tt.events) {
				t.Errorf("events %v, want %v", got, tt.events)
			}
			if tt.reason != "" {
				c := storedCondition(ds, p)
				if c == nil || Reason(c.Reason) != tt.reason || c.Status != tt.status || !strings.Contains(c.Message, tt.message) {
					t.Errorf("Progressing = %+v, want %s/%s saying %q", c, tt.status, tt.reason, tt.message)
				}
			}
			if tt.waits != nil {
				if got := waits(s); !maps.Equal(got, tt.waits) {
					t.Errorf("waits %v, want %v", got, tt.waits)
				}
			}
		})
	}
}

func TestRolloutPause(t *testing.T) {
	paused := withAnnotations(AnnotationPaused, "true")
	runRolloutRows(t, []rolloutRow{
		{name: "paused with maxUnavailable: no old pod is deleted", ds: []dsOpt{paused, withBudget("", "5")},
			reason: ReasonPaused, status: v1.ConditionUnknown, waits: all(ReasonPaused)},
		{name: "paused with maxSurge: no surge pod is created", ds: []dsOpt{paused, withBudget("2", "0")},
			reason: ReasonPaused, status: v1.ConditionUnknown, waits: all(ReasonPaused)},
		{name: "paused: an unavailable old pod is not replaced either", ds: []dsOpt{paused, withBudget("", "1")},
			setup:  func(ds *apps.DaemonSet, s *Snapshot) { replace(s, newPod(ds, "old-n3", "n3", old(), notReady())) },
			reason: ReasonPaused, status: v1.ConditionUnknown, waits: all(ReasonPaused)},
		{name: "paused with maxSurge: an unavailable old pod gets no surge pod", ds: []dsOpt{paused, withBudget("1", "0")},
			setup:  func(ds *apps.DaemonSet, s *Snapshot) { replace(s, newPod(ds, "old-n3", "n3", old(), notReady())) },
			reason: ReasonPaused, status: v1.ConditionUnknown, waits: all(ReasonPaused)},
		{name: "paused while a new pod is not available: still paused", ds: []dsOpt{paused, withBudget("2", "0")},
			setup:  func(ds *apps.DaemonSet, s *Snapshot) { s.Pods = append(s.Pods, newPod(ds, "new-n1", "n1", notReady())) },
			reason: ReasonPaused, status: v1.ConditionUnknown,
			waits: with(all(ReasonPaused, "n1"), "n1", string(ReasonNewPodUnavailable))},
		{name: "paused: a node that joins still gets a pod of the current template", ds: []dsOpt{paused, withBudget("", "5")},
			setup:   func(ds *apps.DaemonSet, s *Snapshot) { s.Nodes = append(s.Nodes, newNode("n6")) },
			creates: []string{"n6"}},
		{name: "paused false: the rollout goes on", ds: []dsOpt{withAnnotations(AnnotationPaused, "false"), withBudget("", "2")},
			deletes: []string{"old-n1", "old-n2"}, reason: ReasonRollingOut, status: v1.ConditionTrue,
			waits: all(ReasonBudgetFull, "n1", "n2")},
	})
}

func TestRolloutPartition(t *testing.T) {
	partition := func(v string) dsOpt { return withAnnotations(AnnotationPartition, v) }
	runRolloutRows(t, []rolloutRow{
		{name: "partition 2 of 5: the first three nodes by name are updated", ds: []dsOpt{partition("2"), withBudget("", "5")},
			deletes: []string{"old-n1", "old-n2", "old-n3"}, reason: ReasonRollingOut, status: v1.ConditionTrue,
			waits: map[string]Reason{"n4": ReasonPartitionHeld, "n5": ReasonPartitionHeld}},
		{name: "partition as a percentage of the nodes, rounded up", ds: []dsOpt{partition("30%"), withBudget("", "5")},
			deletes: []string{"old-n1", "old-n2", "old-n3"}},
		{name: "partition with maxUnavailable 1: one node at a time", ds: []dsOpt{partition("2"), withBudget("", "1")},
			deletes: []string{"old-n1"},
			waits:   map[string]Reason{"n2": ReasonBudgetFull, "n3": ReasonBudgetFull, "n4": ReasonPartitionHeld, "n5": ReasonPartitionHeld}},
		{name: "partition reached: the rest stay on the older revision", ds: []dsOpt{partition("2"), withBudget("", "5")},
			setup:  func(ds *apps.DaemonSet, s *Snapshot) { updated(ds, s, "n1", "n2", "n3") },
			reason: ReasonPartitionHeld, status: v1.ConditionTrue,
			waits: map[string]Reason{"n4": ReasonPartitionHeld, "n5": ReasonPartitionHeld}},
		{name: "partition reached while a new pod is not available: still rolling out", ds: []dsOpt{partition("2"), withBudget("", "5")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				updated(ds, s, "n1", "n2")
				replace(s, newPod(ds, "new-n3", "n3", notReady()))
			},
			reason: ReasonRollingOut, status: v1.ConditionTrue,
			waits: map[string]Reason{"n3": ReasonNewPodUnavailable, "n4": ReasonPartitionHeld, "n5": ReasonPartitionHeld}},
		{name: "partition of all the nodes or more: nothing is updated", ds: []dsOpt{partition("9"), withBudget("", "5")},
			reason: ReasonPartitionHeld, status: v1.ConditionTrue, waits: all(ReasonPartitionHeld)},
		{name: "partition 100%: nothing is updated", ds: []dsOpt{partition("100%"), withBudget("3", "0")},
			reason: ReasonPartitionHeld, status: v1.ConditionTrue, waits: all(ReasonPartitionHeld)},
		{name: "partition 0: every node may be updated", ds: []dsOpt{partition("0"), withBudget("", "5")},
			deletes: []string{"old-n1", "old-n2", "old-n3", "old-n4", "old-n5"}},
		{name: "partition with maxSurge: surge pods on the first three nodes", ds: []dsOpt{partition("2"), withBudget("5", "0")},
			creates: []string{"n1", "n2", "n3"},
			waits:   map[string]Reason{"n4": ReasonPartitionHeld, "n5": ReasonPartitionHeld}},
		{name: "partition with maxSurge: a surging node no longer counts as old", ds: []dsOpt{partition("2"), withBudget("5", "0")},
			setup:   func(ds *apps.DaemonSet, s *Snapshot) { s.Pods = append(s.Pods, newPod(ds, "new-n1", "n1", notReady())) },
			creates: []string{"n2", "n3"}},
		{name: "partition with maxSurge 1: one node at a time", ds: []dsOpt{partition("2"), withBudget("1", "0")},
			creates: []string{"n1"},
			waits:   map[string]Reason{"n2": ReasonBudgetFull, "n3": ReasonBudgetFull, "n4": ReasonPartitionHeld, "n5": ReasonPartitionHeld}},
		{name: "partition and paused: the pause holds every node", ds: []dsOpt{partition("2"), withAnnotations(AnnotationPaused, "true"), withBudget("", "5")},
			reason: ReasonPaused, status: v1.ConditionUnknown, waits: all(ReasonPaused)},
		{name: "partition: unavailable old pods are replaced in node-name order within the partition", ds: []dsOpt{partition("4"), withBudget("", "1")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				replace(s, newPod(ds, "old-n4", "n4", old(), notReady()), newPod(ds, "old-n5", "n5", old(), notReady()))
			},
			deletes: []string{"old-n4"},
			waits:   map[string]Reason{"n1": ReasonPartitionHeld, "n2": ReasonPartitionHeld, "n3": ReasonPartitionHeld, "n5": ReasonPartitionHeld}},
		{name: "partition holds an unavailable old pod: every old node waits on the partition", ds: []dsOpt{partition("5"), withBudget("", "1")},
			setup:  func(ds *apps.DaemonSet, s *Snapshot) { replace(s, newPod(ds, "old-n5", "n5", old(), notReady())) },
			reason: ReasonPartitionHeld, status: v1.ConditionTrue, waits: all(ReasonPartitionHeld)},
		{name: "partition with maxSurge holds an unavailable old pod", ds: []dsOpt{partition("5"), withBudget("1", "0")},
			setup:  func(ds *apps.DaemonSet, s *Snapshot) { replace(s, newPod(ds, "old-n5", "n5", old(), notReady())) },
			reason: ReasonPartitionHeld, status: v1.ConditionTrue, waits: all(ReasonPartitionHeld)},
	})
}

// The nodes a partition lets through do not depend on the order the snapshot lists
// the nodes and pods in.
func TestRolloutPartitionDeterministic(t *testing.T) {
	for _, budget := range []dsOpt{withBudget("", "1"), withBudget("1", "0")} {
		ds := newDS("ds", budget, withAnnotations(AnnotationPartition, "4"))
		var want Plan
		for i, order := range [][]string{{"n1", "n2", "n3", "n4", "n5"}, {"n5", "n4", "n3", "n2", "n1"}, {"n3", "n5", "n1", "n4", "n2"}} {
			s := policyCluster(ds, order...)
			replace(s, newPod(ds, "old-n2", "n2", old(), notReady()), newPod(ds, "old-n4", "n4", old(), notReady()))
			p := Decide(s)
			if len(p.Creates)+len(p.Deletes) != 1 {
				t.Fatalf("order %v: plan updates %v %v, want one node", order, createdOn(p), deletedNames(p))
			}
			if i == 0 {
				want = p
				continue
			}
			if !slices.Equal(createdOn(p), createdOn(want)) || !slices.Equal(deletedNames(p), deletedNames(want)) {
				t.Errorf("order %v: %v %v, want %v %v", order, createdOn(p), deletedNames(p), createdOn(want), deletedNames(want))
			}
		}
	}
}

func TestRolloutCanary(t *testing.T) {
	canary := withAnnotations(AnnotationCanary, "canary=true")
	on := func(names ...string) func(*apps.DaemonSet, *Snapshot) {
		return func(_ *apps.DaemonSet, s *Snapshot) { label(s, []string{"canary", "true"}, names...) }
	}
	runRolloutRows(t, []rolloutRow{
		{name: "canary: only the matching nodes are updated", ds: []dsOpt{canary, withBudget("", "5")}, setup: on("n2", "n4"),
			deletes: []string{"old-n2", "old-n4"}, reason: ReasonRollingOut, status: v1.ConditionTrue,
			waits: all(ReasonCanaryHeld, "n2", "n4")},
		{name: "canary with maxUnavailable 2: at most two canary nodes at once", ds: []dsOpt{canary, withBudget("", "2")}, setup: on("n1", "n3", "n5"),
			deletes: []string{"old-n1", "old-n3"},
			waits:   map[string]Reason{"n2": ReasonCanaryHeld, "n4": ReasonCanaryHeld, "n5": ReasonBudgetFull}},
		{name: "canary with maxUnavailable 2: an unavailable canary pod uses the budget", ds: []dsOpt{canary, withBudget("", "2")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				on("n1", "n3", "n5")(ds, s)
				replace(s, newPod(ds, "new-n1", "n1", notReady()))
			},
			deletes: []string{"old-n3"},
			waits:   map[string]Reason{"n1": ReasonNewPodUnavailable, "n2": ReasonCanaryHeld, "n4": ReasonCanaryHeld, "n5": ReasonBudgetFull}},
		{name: "canary with maxSurge: surge pods on canary nodes only", ds: []dsOpt{canary, withBudget("5", "0")}, setup: on("n2", "n4"),
			creates: []string{"n2", "n4"}, waits: all(ReasonCanaryHeld, "n2", "n4")},
		{name: "canary with maxSurge 1: one canary node at a time", ds: []dsOpt{canary, withBudget("1", "0")}, setup: on("n2", "n4"),
			creates: []string{"n2"}, waits: with(all(ReasonCanaryHeld, "n2", "n4"), "n4", string(ReasonBudgetFull))},
		{name: "canary nodes updated and available: waiting for promotion", ds: []dsOpt{canary, withBudget("", "5")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				on("n2", "n4")(ds, s)
				updated(ds, s, "n2", "n4")
			},
			reason: ReasonCanaryHeld, status: v1.ConditionTrue, waits: all(ReasonCanaryHeld, "n2", "n4")},
		{name: "canary nodes updated, one not yet available: still rolling out", ds: []dsOpt{canary, withBudget("5", "0")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				on("n2", "n4")(ds, s)
				updated(ds, s, "n2")
				replace(s, newPod(ds, "new-n4", "n4", notReady()))
			},
			reason: ReasonRollingOut, status: v1.ConditionTrue},
		{name: "canary: an unavailable old pod on another node is not replaced", ds: []dsOpt{canary, withBudget("", "5")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				on("n2", "n4")(ds, s)
				replace(s, newPod(ds, "old-n5", "n5", old(), notReady()))
			},
			deletes: []string{"old-n2", "old-n4"}},
		{name: "canary with maxSurge: an unavailable old pod on another node gets no surge pod", ds: []dsOpt{canary, withBudget("5", "0")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				on("n2")(ds, s)
				replace(s, newPod(ds, "old-n5", "n5", old(), notReady()))
			},
			creates: []string{"n2"}},
		{name: "canary as a set-based selector", ds: []dsOpt{withAnnotations(AnnotationCanary, "tier in (canary,edge)"), withBudget("", "5")},
			setup: func(_ *apps.DaemonSet, s *Snapshot) {
				label(s, []string{"tier", "canary"}, "n2")
				label(s, []string{"tier", "edge"}, "n3")
			},
			deletes: []string{"old-n2", "old-n3"}},
		{name: "canary with partition: the partition still holds the last canary nodes", ds: []dsOpt{canary, withAnnotations(AnnotationPartition, "2"), withBudget("", "5")},
			setup:   on("n1", "n2", "n3", "n4"),
			deletes: []string{"old-n1", "old-n2", "old-n3"},
			waits:   map[string]Reason{"n4": ReasonPartitionHeld, "n5": ReasonCanaryHeld}},
		{name: "canary: an unavailable old pod on a node that no longer exists is held, the node has no labels", ds: []dsOpt{canary, withBudget("", "5")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				on("n2")(ds, s)
				s.Pods = append(s.Pods, newPod(ds, "old-n9", "n9", old(), notReady()))
			},
			deletes: []string{"old-n2"}, waits: with(all(ReasonCanaryHeld, "n2"), "n9", string(ReasonCanaryHeld))},
		{name: "canary matching no node: waiting for promotion", ds: []dsOpt{canary, withBudget("", "5")},
			reason: ReasonCanaryHeld, status: v1.ConditionTrue, waits: all(ReasonCanaryHeld)},
		{name: "canary and paused: the pause holds the canary nodes too", ds: []dsOpt{canary, withAnnotations(AnnotationPaused, "true"), withBudget("", "5")},
			setup: on("n2"), reason: ReasonPaused, status: v1.ConditionUnknown, waits: all(ReasonPaused)},
	})
}

func TestRolloutWaves(t *testing.T) {
	waves := withAnnotations(AnnotationWaves, "zone")
	zoned := func(names ...string) func(*apps.DaemonSet, *Snapshot) {
		return func(ds *apps.DaemonSet, s *Snapshot) { zones(s); updated(ds, s, names...) }
	}
	later := func(except ...string) map[string]Reason { return all(ReasonLaterWave, except...) }
	runRolloutRows(t, []rolloutRow{
		{name: "waves: the first wave by sorted label value", ds: []dsOpt{waves, withBudget("", "5")}, setup: zoned(),
			deletes: []string{"old-n1", "old-n3"}, reason: ReasonRollingOut, status: v1.ConditionTrue,
			waits: later("n1", "n3")},
		{name: "waves under a canary: the waves are those of the canary nodes", ds: []dsOpt{waves, withAnnotations(AnnotationCanary, "canary=true"), withBudget("", "5")},
			setup:   func(ds *apps.DaemonSet, s *Snapshot) { zones(s); label(s, []string{"canary", "true"}, "n2") },
			deletes: []string{"old-n2"}, waits: all(ReasonCanaryHeld, "n2")},
		{name: "wave-order goes first", ds: []dsOpt{waves, withAnnotations(AnnotationWaveOrder, "b"), withBudget("", "5")}, setup: zoned(),
			deletes: []string{"old-n2", "old-n4"}, waits: later("n2", "n4")},
		{name: "wave-order values no node carries are skipped", ds: []dsOpt{waves, withAnnotations(AnnotationWaveOrder, "c, b ,a"), withBudget("", "5")}, setup: zoned(),
			deletes: []string{"old-n2", "old-n4"}},
		{name: "the next wave once the first is done", ds: []dsOpt{waves, withBudget("", "5")}, setup: zoned("n1", "n3"),
			deletes: []string{"old-n2", "old-n4"}, waits: map[string]Reason{"n5": ReasonLaterWave}},
		{name: "a wave with a new pod not yet available is not done", ds: []dsOpt{waves, withBudget("", "5")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				zoned("n1")(ds, s)
				replace(s, newPod(ds, "new-n3", "n3", notReady()))
			},
			reason: ReasonRollingOut, status: v1.ConditionTrue,
			waits: with(later("n1", "n3"), "n3", string(ReasonNewPodUnavailable))},
		{name: "a wave with an old pod left is not done", ds: []dsOpt{waves, withBudget("", "5")}, setup: zoned("n1"),
			deletes: []string{"old-n3"}, waits: later("n1", "n3")},
		{name: "nodes without the label are the last wave", ds: []dsOpt{waves, withBudget("", "5")}, setup: zoned("n1", "n2", "n3", "n4"),
			deletes: []string{"old-n5"}, waits: map[string]Reason{}},
		{name: "waves with maxUnavailable 1", ds: []dsOpt{waves, withBudget("", "1")}, setup: zoned(),
			deletes: []string{"old-n1"}, waits: with(later("n1", "n3"), "n3", string(ReasonBudgetFull))},
		{name: "waves with maxSurge: surge pods in the current wave only", ds: []dsOpt{waves, withBudget("5", "0")}, setup: zoned(),
			creates: []string{"n1", "n3"}, waits: later("n1", "n3")},
		{name: "waves with maxSurge: a wave still surging holds the next", ds: []dsOpt{waves, withBudget("5", "0")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				zoned("n3")(ds, s)
				s.Pods = append(s.Pods, newPod(ds, "new-n1", "n1", notReady()))
			},
			waits: with(later("n1", "n3"), "n1", string(ReasonNewPodUnavailable))},
		{name: "waves with maxSurge 1", ds: []dsOpt{waves, withBudget("1", "0")}, setup: zoned("n1"),
			creates: []string{"n3"}},
		{name: "waves: an unavailable old pod in a later wave is not replaced", ds: []dsOpt{waves, withBudget("", "5")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				zoned()(ds, s)
				replace(s, newPod(ds, "old-n4", "n4", old(), notReady()))
			},
			deletes: []string{"old-n1", "old-n3"}},
		{name: "waves: a node the pod should not run on belongs to no wave", ds: []dsOpt{waves, withBudget("", "5")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				zoned("n1")(ds, s)
				withTaint("dedicated", v1.TaintEffectNoSchedule)(s.Nodes[2]) // n3 keeps its old pod
			},
			deletes: []string{"old-n2", "old-n4"}},
		{name: "waves: an old pod on a node that no longer exists is in no wave", ds: []dsOpt{waves, withBudget("", "5")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				zoned()(ds, s)
				s.Pods = append(s.Pods, newPod(ds, "old-n9", "n9", old()))
			},
			deletes: []string{"old-n1", "old-n3"}, waits: with(later("n1", "n3"), "n9", string(ReasonLaterWave))},
		{name: "wave-pause: the next wave waits for the bake time", ds: []dsOpt{waves, withAnnotations(AnnotationWavePause, "10m"), withBudget("", "5")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				zoned("n1")(ds, s)
				replace(s, newPod(ds, "new-n3", "n3", readySince(t0.Add(-4*time.Minute))))
			},
			reason: ReasonWavePause, status: v1.ConditionTrue, requeue: 6 * time.Minute,
			waits: all(ReasonWavePause, "n1", "n3")},
		{name: "wave-pause counts from availability, minReadySeconds included", ds: []dsOpt{waves, withAnnotations(AnnotationWavePause, "10m"), withMinReady(120), withBudget("", "5")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				zoned("n1")(ds, s)
				replace(s, newPod(ds, "new-n3", "n3", readySince(t0.Add(-9*time.Minute))))
			},
			reason: ReasonWavePause, status: v1.ConditionTrue, requeue: 3 * time.Minute},
		{name: "wave-pause over: the next wave", ds: []dsOpt{waves, withAnnotations(AnnotationWavePause, "10m"), withBudget("5", "0")}, setup: zoned("n1", "n3"),
			creates: []string{"n2", "n4"}},
		{name: "wave-pause does not hold the first wave", ds: []dsOpt{waves, withAnnotations(AnnotationWavePause, "10m"), withBudget("", "5")}, setup: zoned(),
			deletes: []string{"old-n1", "old-n3"}},
		{name: "wave-pause with maxSurge: no surge pod during the bake time", ds: []dsOpt{waves, withAnnotations(AnnotationWavePause, "1h"), withBudget("5", "0")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				zoned("n1")(ds, s)
				replace(s, newPod(ds, "new-n3", "n3", readySince(t0.Add(-30*time.Minute))), newPod(ds, "old-n4", "n4", old(), notReady()))
			},
			reason: ReasonWavePause, status: v1.ConditionTrue, requeue: 30 * time.Minute,
			waits: all(ReasonWavePause, "n1", "n3")},
		{name: "waves and paused: the pause holds the current wave", ds: []dsOpt{waves, withAnnotations(AnnotationPaused, "true"), withBudget("", "5")}, setup: zoned(),
			reason: ReasonPaused, status: v1.ConditionUnknown, waits: all(ReasonPaused)},
		{name: "waves and partition: the partition holds nodes of the last wave", ds: []dsOpt{waves, withAnnotations(AnnotationPartition, "1"), withBudget("", "5")}, setup: zoned("n1", "n3"),
			deletes: []string{"old-n2", "old-n4"}, waits: map[string]Reason{"n5": ReasonLaterWave}},
		{name: "waves and partition reached", ds: []dsOpt{waves, withAnnotations(AnnotationPartition, "1"), withBudget("", "5")}, setup: zoned("n1", "n2", "n3", "n4"),
			reason: ReasonPartitionHeld, status: v1.ConditionTrue, waits: map[string]Reason{"n5": ReasonPartitionHeld}},
	})
}

func TestRolloutInvalidAnnotation(t *testing.T) {
	invalid := withAnnotations(AnnotationPaused, "yes")
	runRolloutRows(t, []rolloutRow{
		{name: "invalid annotation with maxUnavailable: nothing is deleted", ds: []dsOpt{invalid, withBudget("", "5")},
			reason: ReasonInvalidAnnotation, status: v1.ConditionFalse, waits: all(ReasonInvalidAnnotation)},
		{name: "invalid annotation with maxSurge: nothing is created", ds: []dsOpt{invalid, withBudget("5", "0")},
			reason: ReasonInvalidAnnotation, status: v1.ConditionFalse, waits: all(ReasonInvalidAnnotation)},
		{name: "invalid annotation: an unavailable old pod is not replaced", ds: []dsOpt{invalid, withBudget("", "1")},
			setup:  func(ds *apps.DaemonSet, s *Snapshot) { replace(s, newPod(ds, "old-n3", "n3", old(), notReady())) },
			reason: ReasonInvalidAnnotation, status: v1.ConditionFalse, waits: all(ReasonInvalidAnnotation)},
		{name: "unknown rollout annotation holds everything", ds: []dsOpt{withAnnotations(RolloutPrefix+"speed", "fast"), withBudget("", "5")},
			reason: ReasonInvalidAnnotation, status: v1.ConditionFalse, waits: all(ReasonInvalidAnnotation)},
		{name: "an invalid annotation beside valid ones still holds everything",
			ds:     []dsOpt{withAnnotations(AnnotationCanary, "canary=true", AnnotationPartition, "-1"), withBudget("", "5")},
			setup:  func(_ *apps.DaemonSet, s *Snapshot) { label(s, []string{"canary", "true"}, "n1", "n2") },
			reason: ReasonInvalidAnnotation, status: v1.ConditionFalse, waits: all(ReasonInvalidAnnotation)},
		{name: "invalid annotation: a node that joins still gets a pod", ds: []dsOpt{invalid, withBudget("", "5")},
			setup:   func(ds *apps.DaemonSet, s *Snapshot) { s.Nodes = append(s.Nodes, newNode("n6")) },
			creates: []string{"n6"}},
		{name: "invalid annotation while a new pod is not available: still invalid", ds: []dsOpt{invalid, withBudget("", "5")},
			setup:  func(ds *apps.DaemonSet, s *Snapshot) { replace(s, newPod(ds, "new-n1", "n1", notReady())) },
			reason: ReasonInvalidAnnotation, status: v1.ConditionFalse},
	})
}
