package rolloutplan

import (
	"time"
)

// Schedule is a rollout as the planner expects it to go: the steps at which nodes
// begin their update, what the rollout waits for after each, and how it ends.
type Schedule struct {
	// DaemonSet is namespace/name.
	DaemonSet string `json:"daemonSet"`
	// FromRevisions are the revision numbers the nodes run before the rollout (the
	// pods' revisions that are not the new one), lowest first.
	FromRevisions []int64 `json:"fromRevisions,omitempty"`
	// ToRevision is the new template's revision number (the number it will get,
	// when no revision records it yet); ToHash its hash.
	ToRevision int64  `json:"toRevision"`
	ToHash     string `json:"toHash"`
	// Policy describes the update strategy and the rollout annotations, for people.
	Policy []string `json:"policy"`
	// Desired is how many nodes should run the pod; ToUpdate how many of them run
	// no pod of the new revision at the start.
	Desired  int `json:"desired"`
	ToUpdate int `json:"toUpdate"`
	// PodStart is the assumed time from a pod's creation to Ready.
	PodStart Duration `json:"podStart"`
	// WaveKey is the node label of the waves; "" when the rollout has none.
	WaveKey string `json:"waveKey,omitempty"`
	// Notes are things the estimate cannot show, such as host ports under maxSurge.
	Notes []string `json:"notes,omitempty"`
	Steps []Step   `json:"steps"`
	End   End      `json:"end"`
	// Decisions counts the core's decisions the simulation made.
	Decisions int `json:"decisions"`
}

// Step is one moment at which the rollout moves.
type Step struct {
	// At is the time since the start of the plan.
	At Duration `json:"at"`
	// Nodes are the nodes whose update begins now (old pod deleted, or surge pod
	// created beside it), in name order.
	Nodes []string `json:"nodes,omitempty"`
	// Waves are the waves label values of Nodes, in order, each once.
	Waves []string `json:"waves,omitempty"`
	// Placed are nodes that had no pod (or a failed one) and get one now.
	Placed []Placement `json:"placed,omitempty"`
	// Then is what the rollout waits for after this step, until the next one (or
	// the end), in the order it meets them.
	Then []Wait `json:"then,omitempty"`
}

// Placement is a pod given to a node that had none to update.
type Placement struct {
	Node string `json:"node"`
	// Stable: the pod is of the stable (older) revision, under new-nodes: stable.
	Stable bool   `json:"stable,omitempty"`
	Reason string `json:"reason"`
}

// Wait is one thing the rollout waits for between steps.
type Wait struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// End is how the rollout ends, or where the plan stops following it.
type End struct {
	State EndState `json:"state"`
	// At is when that happens, since the start of the plan: for a completed rollout,
	// the estimated duration.
	At Duration `json:"at"`
	// Reason and Message say why it holds or failed (the Progressing condition's,
	// where the DaemonSet has one).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Continue is what a person does to go on, when the rollout holds.
	Continue string `json:"continue,omitempty"`
	// Updated and Desired count the nodes running an available pod of the new
	// revision at that point, and the nodes that should run the pod.
	Updated int `json:"updated"`
	Desired int `json:"desired"`
}

// EndState says how a plan ends.
type EndState string

const (
	// Complete: every node runs an available pod of the new revision, done baking.
	Complete EndState = "complete"
	// Held: the rollout waits for something only a person ends.
	Held EndState = "held"
	// Failed: the rollout would fail (its progress deadline, or the spec is invalid).
	Failed EndState = "failed"
	// Limit: the plan gave up following it (too many steps or too long).
	Limit EndState = "limit"
)

// Duration is a time.Duration shown as "1m30s" in JSON.
type Duration time.Duration

// MarshalText writes the duration rounded to the millisecond.
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(time.Duration(d).Round(time.Millisecond).String()), nil
}

// UnmarshalText reads what MarshalText writes.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}
