package daemon

import (
	"bytes"
	"reflect"
	"testing"

	apps "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/json"
)

// revision returns a ControllerRevision of ds holding data, labelled with hash
// (none when hash is empty).
func revision(ds *apps.DaemonSet, name, hash string, number int64, data []byte) *apps.ControllerRevision {
	r := &apps.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: testNS, Labels: map[string]string{"app": ds.Name},
			OwnerReferences: []metav1.OwnerReference{*ControllerRef(ds)},
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: number,
	}
	if hash != "" {
		r.Labels[HashLabel] = hash
	}
	return r
}

func mustPatch(t *testing.T, ds *apps.DaemonSet) []byte {
	t.Helper()
	p, err := TemplatePatch(&ds.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func noName(string) bool { return false }

func TestTemplatePatchShape(t *testing.T) {
	ds := newDS("ds", func(ds *apps.DaemonSet) {
		ds.Spec.Template.Annotations = map[string]string{"z": "1", "a": "2"}
		big := int64(1<<60 + 1) // not representable as a float64
		ds.Spec.Template.Spec.ActiveDeadlineSeconds = &big
	})
	patch := mustPatch(t, ds)

	var got map[string]map[string]map[string]any
	if err := json.Unmarshal(patch, &got); err != nil {
		t.Fatalf("patch is not JSON: %v", err)
	}
	if len(got) != 1 || len(got["spec"]) != 1 {
		t.Fatalf("patch = %s, want exactly {\"spec\":{\"template\":...}}", patch)
	}
	tmpl := got["spec"]["template"]
	if tmpl["$patch"] != "replace" {
		t.Errorf("template $patch = %v, want replace", tmpl["$patch"])
	}
	if !bytes.Contains(patch, []byte(`"activeDeadlineSeconds":1152921504606846977,`)) {
		t.Errorf("integers must stay integral: %s", patch)
	}
	if !bytes.Contains(patch, []byte(`"annotations":{"a":"2","z":"1"}`)) {
		t.Errorf("keys must be sorted: %s", patch)
	}
	if !bytes.HasPrefix(patch, []byte(`{"spec":{"template":{"$patch":"replace","metadata":`)) {
		t.Errorf("unexpected prefix: %s", patch)
	}

	// kube-controller-manager derives the same bytes from the whole DaemonSet;
	// equal bytes are what lets us reuse the revisions it wrote.
	whole, _ := json.Marshal(ds)
	var generic map[string]any
	_ = json.Unmarshal(whole, &generic)
	template := generic["spec"].(map[string]any)["template"].(map[string]any)
	template["$patch"] = "replace"
	want, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": template}})
	if !bytes.Equal(patch, want) {
		t.Errorf("patch differs from the one derived from the DaemonSet:\n got %s\nwant %s", patch, want)
	}

	for i := 0; i < 20; i++ {
		if again := mustPatch(t, ds.DeepCopy()); !bytes.Equal(again, patch) {
			t.Fatalf("patch not deterministic:\n%s\n%s", patch, again)
		}
	}
	if other := mustPatch(t, newDS("ds", withImage("img:v2"))); bytes.Equal(other, patch) {
		t.Error("different templates gave the same patch")
	}
}

func TestTemplateHash(t *testing.T) {
	ds := newDS("ds")
	h := TemplateHash(&ds.Spec.Template, nil)
	if h == "" || h != TemplateHash(&ds.DeepCopy().Spec.Template, nil) {
		t.Fatalf("hash %q not deterministic", h)
	}
	zero, one := int32(0), int32(1)
	if TemplateHash(&ds.Spec.Template, &zero) == h {
		t.Error("collision count 0 must salt the hash")
	}
	if TemplateHash(&ds.Spec.Template, &one) == TemplateHash(&ds.Spec.Template, &zero) {
		t.Error("different collision counts gave the same hash")
	}
	if TemplateHash(&newDS("ds", withImage("img:v2")).Spec.Template, nil) == h {
		t.Error("different templates gave the same hash")
	}
}

func TestDecideHistory(t *testing.T) {
	ds := newDS("ds", func(ds *apps.DaemonSet) { ds.Annotations = map[string]string{"note": "x"} })
	cur := mustPatch(t, ds)
	other := mustPatch(t, newDS("ds", withImage("img:v0")))
	other2 := mustPatch(t, newDS("ds", withImage("img:v00")))

	t.Run("match is reused", func(t *testing.T) {
		r := revision(ds, "ds-h1", "h1", 3, cur)
		hp := decideHistory(ds, cur, []*apps.ControllerRevision{revision(ds, "ds-h0", "h0", 2, other), r}, noName)
		if hp.current != r || hp.create || hp.renumber || hp.collided || len(hp.dedup) != 0 {
			t.Fatalf("plan = %+v, want current reused as is", hp)
		}
		if len(hp.old) != 1 || hp.old[0].Name != "ds-h0" {
			t.Errorf("old = %v", hp.old)
		}
	})

	t.Run("no match: create <ds>-<hash> numbered after the newest", func(t *testing.T) {
		hp := decideHistory(ds, cur, []*apps.ControllerRevision{revision(ds, "ds-a", "a", 4, other), revision(ds, "ds-b", "b", 2, other2)}, noName)
		hash := TemplateHash(&ds.Spec.Template, nil)
		c := hp.current
		if !hp.create || c == nil || c.Name != "ds-"+hash || c.Revision != 5 {
			t.Fatalf("plan = %+v, want create ds-%s revision 5", hp, hash)
		}
		if c.Labels[HashLabel] != hash || c.Labels["app"] != "ds" || c.Namespace != testNS {
			t.Errorf("labels/namespace = %v %q", c.Labels, c.Namespace)
		}
		if !bytes.Equal(c.Data.Raw, cur) || c.Annotations["note"] != "x" {
			t.Errorf("data or annotations wrong: %s %v", c.Data.Raw, c.Annotations)
		}
		if ref := metav1.GetControllerOf(c); ref == nil || ref.UID != ds.UID || ref.Kind != "DaemonSet" {
			t.Errorf("controller ref = %+v", ref)
		}
		if ds.Spec.Template.Labels[HashLabel] != "" {
			t.Error("template labels modified")
		}
	})

	t.Run("first revision is number 1", func(t *testing.T) {
		if hp := decideHistory(ds, cur, nil, noName); !hp.create || hp.current.Revision != 1 {
			t.Fatalf("plan = %+v", hp)
		}
	})

	t.Run("name taken by a different revision: collision", func(t *testing.T) {
		hp := decideHistory(ds, cur, nil, func(n string) bool { return n == "ds-"+hashOf(ds) })
		if !hp.collided || hp.create || hp.current != nil {
			t.Fatalf("plan = %+v, want collided", hp)
		}
	})

	t.Run("duplicates: highest revision kept, others deduped", func(t *testing.T) {
		a, b, c := revision(ds, "ds-a", "a", 2, cur), revision(ds, "ds-b", "b", 7, cur), revision(ds, "ds-c", "c", 5, cur)
		hp := decideHistory(ds, cur, []*apps.ControllerRevision{a, b, c}, noName)
		if hp.current != b || hp.renumber {
			t.Fatalf("current = %v (renumber %v), want ds-b", hp.current.Name, hp.renumber)
		}
		if len(hp.dedup) != 2 || hp.dedup[0] != a || hp.dedup[1] != c {
			t.Errorf("dedup = %v, want ds-a ds-c", hp.dedup)
		}
		if !reflect.DeepEqual(hp.dupHashs, map[string]bool{"a": true, "c": true}) {
			t.Errorf("dupHashs = %v", hp.dupHashs)
		}
	})

	t.Run("duplicates with equal numbers: the last is kept", func(t *testing.T) {
		a, b := revision(ds, "ds-a", "a", 3, cur), revision(ds, "ds-b", "b", 3, cur)
		if hp := decideHistory(ds, cur, []*apps.ControllerRevision{a, b}, noName); hp.current != b {
			t.Errorf("current = %s, want ds-b", hp.current.Name)
		}
	})

	t.Run("current older than an old one: renumbered copy", func(t *testing.T) {
		r := revision(ds, "ds-h1", "h1", 1, cur)
		hp := decideHistory(ds, cur, []*apps.ControllerRevision{r, revision(ds, "ds-h0", "h0", 6, other)}, noName)
		if !hp.renumber || hp.current == r || hp.current.Revision != 7 || hp.current.Name != "ds-h1" {
			t.Fatalf("plan = %+v, want ds-h1 renumbered to 7 in a copy", hp)
		}
		if r.Revision != 1 {
			t.Error("input revision modified")
		}
	})

	t.Run("missing hash label gets the revision's name", func(t *testing.T) {
		unlabelled := revision(ds, "ds-legacy", "", 1, other)
		unlabelled.Labels = nil
		match := revision(ds, "ds-cur", "", 2, cur)
		hp := decideHistory(ds, cur, []*apps.ControllerRevision{unlabelled, match}, noName)
		if len(hp.label) != 2 || hp.label[0].Labels[HashLabel] != "ds-legacy" || hp.label[1].Labels[HashLabel] != "ds-cur" {
			t.Fatalf("label = %v", hp.label)
		}
		if unlabelled.Labels != nil || match.Labels[HashLabel] != "" {
			t.Error("input revisions modified")
		}
		if hp.current.Labels[HashLabel] != "ds-cur" || hp.old[0].Labels[HashLabel] != "ds-legacy" {
			t.Errorf("current/old should be the labelled copies: %v %v", hp.current.Labels, hp.old[0].Labels)
		}
	})

	t.Run("unlabelled current that needs renumbering: one write carries both", func(t *testing.T) {
		match := revision(ds, "ds-cur", "", 1, cur)
		hp := decideHistory(ds, cur, []*apps.ControllerRevision{match, revision(ds, "ds-h0", "h0", 4, other)}, noName)
		if !hp.renumber || hp.current.Revision != 5 || hp.current.Labels[HashLabel] != "ds-cur" {
			t.Fatalf("current = %+v, want ds-cur labelled and renumbered to 5", hp.current)
		}
		for _, r := range hp.label {
			if r.Name == "ds-cur" {
				t.Fatalf("ds-cur planned for a separate label update as well: %v", hp.label)
			}
		}
	})

	t.Run("old sorted oldest first", func(t *testing.T) {
		hp := decideHistory(ds, cur, []*apps.ControllerRevision{
			revision(ds, "r3", "3", 3, other), revision(ds, "r1", "1", 1, other), revision(ds, "r2", "2", 2, other2),
		}, noName)
		if len(hp.old) != 3 || hp.old[0].Name != "r1" || hp.old[1].Name != "r2" || hp.old[2].Name != "r3" {
			t.Errorf("old = %v", hp.old)
		}
	})
}

func TestRevisionsToPrune(t *testing.T) {
	ds := newDS("ds")
	old := func(n int) []*apps.ControllerRevision {
		var out []*apps.ControllerRevision
		for i := 1; i <= n; i++ {
			h := string(rune('a' + i - 1))
			out = append(out, revision(ds, "r-"+h, h, int64(i), nil))
		}
		return out
	}
	names := func(rs []*apps.ControllerRevision) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Name)
		}
		return out
	}
	tests := []struct {
		name  string
		old   int
		limit int32
		live  map[string]bool
		want  []string
	}{
		{name: "within the limit: nothing", old: 3, limit: 3},
		{name: "over the limit: oldest first", old: 5, limit: 2, want: []string{"r-a", "r-b", "r-c"}},
		{name: "limit zero prunes all", old: 2, limit: 0, want: []string{"r-a", "r-b"}},
		{name: "revisions with live pods kept", old: 4, limit: 1, live: map[string]bool{"a": true, "c": true}, want: []string{"r-b", "r-d"}},
		{name: "live pods may leave more than the limit", old: 3, limit: 1, live: map[string]bool{"a": true, "b": true}, want: []string{"r-c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := names(revisionsToPrune(old(tt.old), tt.limit, tt.live))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("prune = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestControllerRef(t *testing.T) {
	ref := ControllerRef(newDS("ds"))
	if ref.APIVersion != "apps/v1" || ref.Kind != "DaemonSet" || ref.Name != "ds" || ref.UID != "uid-ds" ||
		ref.Controller == nil || !*ref.Controller || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("ControllerRef = %+v", ref)
	}
}
