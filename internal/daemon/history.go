package daemon

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/dump"
)

// TemplatePatch returns the Data of the ControllerRevision that records template: a
// strategic merge patch {"spec":{"template":{...,"$patch":"replace"}}} with every
// object's keys sorted. Applying it restores the template, which is how
// `kubectl rollout undo` works, and its bytes are what identifies a revision: two
// templates are the same revision exactly when their patches are byte-identical.
func TemplatePatch(template *v1.PodTemplateSpec) ([]byte, error) {
	raw, err := json.Marshal(template)
	if err != nil {
		return nil, fmt.Errorf("encoding pod template: %w", err)
	}
	// A round trip through a generic map sorts every object's keys and keeps
	// integers integral, so equal templates always produce equal bytes.
	var generic map[string]interface{}
	if err := json.Unmarshal(raw, &generic); err != nil {
		return nil, fmt.Errorf("decoding pod template: %w", err)
	}
	generic["$patch"] = "replace"
	return json.Marshal(map[string]interface{}{
		"spec": map[string]interface{}{"template": generic},
	})
}

// TemplateHash names a new revision of template: an FNV-32a hash of the template's
// deep dump, salted by the collision count, encoded with safe characters. A revision's
// hash, once written, is read back from its label and never recomputed.
func TemplateHash(template *v1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(*template))
	if collisionCount != nil {
		salt := make([]byte, 8)
		binary.LittleEndian.PutUint32(salt, uint32(*collisionCount))
		h.Write(salt)
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// historyPlan is what the history rules decide for one sync.
type historyPlan struct {
	current  *apps.ControllerRevision   // the revision of the current template (may be to create)
	create   bool                       // current does not exist yet
	renumber bool                       // current's Revision must be raised to the newest
	label    []*apps.ControllerRevision // copies of revisions given their missing hash label
	dedup    []*apps.ControllerRevision // duplicates of current, to delete after relabelling
	dupHashs map[string]bool            // hashes of the duplicates, whose pods move to current
	old      []*apps.ControllerRevision // every other revision, oldest first
	collided bool                       // the new revision's name is taken by a different one
}

// decideHistory finds, or plans, the ControllerRevision of ds's current template among
// the revisions ds controls (after claiming).
//
// Rules: a revision matches when its Data equals the template's patch. Several matches
// are duplicates: the one with the highest Revision (the last of equals) is kept and the
// others are deleted once their pods carry its hash. The current revision's number is
// raised above every other's. With no match, a revision named <ds>-<hash> is planned; if
// that name is held by a revision that does not match, that is a collision and the
// DaemonSet's collisionCount must grow before a name can be chosen.
func decideHistory(ds *apps.DaemonSet, patch []byte, controlled []*apps.ControllerRevision, nameTaken func(string) bool) historyPlan {
	var hp historyPlan
	var matches []*apps.ControllerRevision
	for _, r := range controlled {
		if _, ok := r.Labels[HashLabel]; !ok {
			labelled := r.DeepCopy()
			if labelled.Labels == nil {
				labelled.Labels = map[string]string{}
			}
			labelled.Labels[HashLabel] = labelled.Name
			hp.label = append(hp.label, labelled)
			r = labelled
		}
		if bytes.Equal(r.Data.Raw, patch) {
			matches = append(matches, r)
		} else {
			hp.old = append(hp.old, r)
		}
	}
	sortRevisions(hp.old)
	next := int64(1)
	if n := len(hp.old); n > 0 {
		next = hp.old[n-1].Revision + 1
	}

	if len(matches) == 0 {
		hash := TemplateHash(&ds.Spec.Template, ds.Status.CollisionCount)
		name := ds.Name + "-" + hash
		if nameTaken(name) {
			hp.collided = true
			return hp
		}
		hp.current, hp.create = newRevision(ds, name, hash, patch, next), true
		return hp
	}

	keep := matches[0]
	for _, m := range matches[1:] {
		if m.Revision >= keep.Revision {
			keep = m
		}
	}
	for _, m := range matches {
		if m == keep {
			continue
		}
		hp.dedup = append(hp.dedup, m)
		if hp.dupHashs == nil {
			hp.dupHashs = map[string]bool{}
		}
		hp.dupHashs[m.Labels[HashLabel]] = true
	}
	hp.current = keep
	if keep.Revision < next {
		hp.current = keep.DeepCopy()
		hp.current.Revision = next
		hp.renumber = true
		// One write carries both changes: a separate label update would make the
		// renumbering conflict.
		hp.label = slices.DeleteFunc(hp.label, func(r *apps.ControllerRevision) bool { return r == keep })
	}
	return hp
}

// record puts what the history rules decided into the Plan: the revision to create
// or renumber, the labels to add, the duplicates to remove once their pods carry the
// current hash, and that hash.
func (hp *historyPlan) record(claimed []*v1.Pod, p *Plan) {
	p.LabelRevisions = hp.label
	if hp.create {
		p.CreateRevision = hp.current
	}
	if hp.renumber {
		p.RenumberRevision = hp.current
	}
	p.DedupRevisions = hp.dedup
	p.Hash = hp.current.Labels[HashLabel]
	for _, pod := range claimed {
		if hp.dupHashs[pod.Labels[HashLabel]] {
			p.Relabel = append(p.Relabel, pod)
		}
	}
}

// prune is the old revisions beyond ds's history limit to delete (nil when there are
// none).
func (hp *historyPlan) prune(ds *apps.DaemonSet, claimed []*v1.Pod) []*apps.ControllerRevision {
	limit := int32(defaultRevisionHistoryLimit)
	if ds.Spec.RevisionHistoryLimit != nil {
		limit = *ds.Spec.RevisionHistoryLimit
	}
	if len(hp.old) <= int(limit) {
		// Only then do the pods' hashes matter; most syncs skip the pass over them.
		return nil
	}
	return revisionsToPrune(hp.old, limit, liveHashes(claimed))
}

// collided is the status that salts the next revision's hash: the name for the new
// revision is taken, so collisionCount grows, and the DaemonSet is looked at again
// once the status write is seen. An unset count counts as zero, so the first
// collision makes it one.
func collided(ds *apps.DaemonSet) *apps.DaemonSetStatus {
	next := ds.Status.DeepCopy()
	next.CollisionCount = new(int32)
	if ds.Status.CollisionCount != nil {
		*next.CollisionCount = *ds.Status.CollisionCount
	}
	*next.CollisionCount++
	return next
}

// liveHashes are the revision hashes carried by the DaemonSet's pods, finished ones
// included: their revisions are kept.
func liveHashes(pods []*v1.Pod) map[string]bool {
	live := make(map[string]bool)
	for _, pod := range pods {
		if h := pod.Labels[HashLabel]; h != "" {
			live[h] = true
		}
	}
	return live
}

// revisionTemplate decodes the pod template a revision records.
func revisionTemplate(r *apps.ControllerRevision) (*v1.PodTemplateSpec, error) {
	var data struct {
		Spec struct {
			Template v1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(r.Data.Raw, &data); err != nil {
		return nil, fmt.Errorf("decoding revision %s: %w", r.Name, err)
	}
	return &data.Spec.Template, nil
}

// revisionsToPrune picks the revisions to delete so that at most limit old revisions
// remain, oldest first, never one that a live pod still carries.
func revisionsToPrune(old []*apps.ControllerRevision, limit int32, liveHashes map[string]bool) []*apps.ControllerRevision {
	excess := len(old) - int(limit)
	var prune []*apps.ControllerRevision
	for _, r := range old {
		if excess <= 0 {
			break
		}
		if liveHashes[r.Labels[HashLabel]] {
			continue
		}
		prune = append(prune, r)
		excess--
	}
	return prune
}

func newRevision(ds *apps.DaemonSet, name, hash string, patch []byte, number int64) *apps.ControllerRevision {
	labels := make(map[string]string, len(ds.Spec.Template.Labels)+1)
	for k, v := range ds.Spec.Template.Labels {
		labels[k] = v
	}
	labels[HashLabel] = hash
	var annotations map[string]string
	if ds.Annotations != nil {
		annotations = make(map[string]string, len(ds.Annotations))
		for k, v := range ds.Annotations {
			annotations[k] = v
		}
	}
	return &apps.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       ds.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{*ControllerRef(ds)},
		},
		Data:     runtime.RawExtension{Raw: patch},
		Revision: number,
	}
}

// ControllerRef is the owner reference by which ds controls its pods and revisions.
func ControllerRef(ds *apps.DaemonSet) *metav1.OwnerReference {
	return metav1.NewControllerRef(ds, apps.SchemeGroupVersion.WithKind("DaemonSet"))
}

// sortRevisions sorts revisions oldest first, by Revision number; equal numbers keep
// their order.
func sortRevisions(revs []*apps.ControllerRevision) {
	slices.SortStableFunc(revs, func(a, b *apps.ControllerRevision) int { return cmpInt64(a.Revision, b.Revision) })
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// recordedRevisions finds the revisions of ds as the other controller recorded them:
// the current one is the revision whose Data is byte for byte the template's patch.
// ok is false until that controller has finished recording the template: no such
// revision yet, several of them, or one not yet renumbered to the newest.
func recordedRevisions(s *Snapshot, patch []byte) (revisions, bool) {
	var revs revisions
	for _, r := range s.Revisions {
		if !metav1.IsControlledBy(r, s.DaemonSet) {
			continue
		}
		if !bytes.Equal(r.Data.Raw, patch) {
			revs.old = append(revs.old, r)
			continue
		}
		if revs.current != nil || r.Labels[HashLabel] == "" {
			return revisions{}, false
		}
		revs.current = r
	}
	if revs.current == nil {
		return revisions{}, false
	}
	sortRevisions(revs.old)
	if n := len(revs.old); n > 0 && revs.old[n-1].Revision >= revs.current.Revision {
		return revisions{}, false
	}
	return revs, true
}
