package inspect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/everynode/everynode/internal/daemon"
)

// StatusOptions shape Status.
type StatusOptions struct {
	// Watch: follow the rollout until it completes, fails or Timeout passes; else
	// print its state once.
	Watch   bool
	Timeout time.Duration // zero for none
	Out     io.Writer
	// Terminal: Out is a terminal, where the progress is redrawn in place (lines cut
	// to Width when it is positive). Elsewhere a line is printed per change.
	Terminal bool
	Width    int
	// Refresh is how often the per-wave counts are recomputed while no DaemonSet
	// change arrives; zero means every 2s.
	Refresh time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Progress is one look at a DaemonSet's rollout.
type Progress struct {
	Name                           string
	Generation, ObservedGeneration int64
	Desired, Updated, Available    int32
	// Condition is the Progressing condition the controller stored, if any.
	Condition *apps.DaemonSetCondition
	// WaveKey and Waves: the node counts of each wave, when the rollout goes by waves.
	WaveKey string
	Waves   []Counts
	// Failure says why the rollout failed, in one line ("" while it has not).
	Failure string
	// Unavailable counts the nodes without an available pod by cause, when it was
	// looked for (Unavailable: once, not on every refresh of a watch).
	Unavailable []daemon.CauseCount
}

// LookUnavailable reads why the DaemonSet's unavailable nodes are so, into p; it lists
// the nodes and the namespace's pods and revisions, so a watch does it once, at
// its end, not on every refresh.
func (p *Progress) LookUnavailable(ctx context.Context, client kubernetes.Interface, ds *apps.DaemonSet, now time.Time) {
	if p.Available >= p.Desired {
		return
	}
	if s, err := Gather(ctx, client, ds, now); err == nil {
		p.Unavailable = daemon.Explain(s).Unavailable
	}
}

func (p Progress) unavailableSuffix() string {
	if len(p.Unavailable) == 0 {
		return ""
	}
	return "; unavailable: " + daemon.FormatCauses(p.Unavailable)
}

// Observed reports whether the controller has seen the DaemonSet's latest spec.
func (p Progress) Observed() bool { return p.ObservedGeneration >= p.Generation }

// Complete: every node that should run the pod runs an available pod of the current
// template.
func (p Progress) Complete() bool {
	return p.Observed() && p.Updated == p.Desired && p.Available == p.Desired
}

// Look reads a rollout's progress from ds. The per-wave counts, and the check that a
// failure the stored condition reports is still current, come from daemon.Explain
// over the DaemonSet's nodes, pods and revisions; they are read only when needed.
func Look(ctx context.Context, client kubernetes.Interface, ds *apps.DaemonSet, now time.Time) (Progress, error) {
	st := ds.Status
	p := Progress{Name: ds.Name, Generation: ds.Generation, ObservedGeneration: st.ObservedGeneration,
		Desired: st.DesiredNumberScheduled, Updated: st.UpdatedNumberScheduled, Available: st.NumberAvailable}
	p.Condition = daemon.Progressing(&st)
	pol := daemon.PolicyOf(ds)
	p.WaveKey = pol.WaveKey
	// A False condition may be stale (the rollout was resumed, the annotation fixed,
	// since the controller wrote it): it counts only when the controller's rules,
	// applied to the cluster as it is now, still say so.
	failed := p.Condition != nil && p.Condition.Status == v1.ConditionFalse && p.Observed()
	if pol.WaveKey == "" && !failed {
		return p, nil
	}
	s, err := Gather(ctx, client, ds, now)
	if err != nil {
		return p, err
	}
	r := daemon.Explain(s)
	if r.Policy.WaveKey != "" {
		p.Waves = Waves(r)
	}
	if c := r.Progressing; failed && c != nil && c.Status == v1.ConditionFalse {
		p.Failure = fmt.Sprintf("rollout of daemonset/%s failed: %s: %s", ds.Name, c.Reason, c.Message)
	}
	return p, nil
}

// Line is the progress on one line.
func (p Progress) Line() string {
	parts := []string{fmt.Sprintf("daemonset/%s: %d of %d updated, %d of %d available", p.Name, p.Updated, p.Desired, p.Available, p.Desired)}
	if !p.Observed() {
		parts[0] += fmt.Sprintf(" (the controller has not seen generation %d yet)", p.Generation)
	}
	if c := p.Condition; c != nil {
		parts = append(parts, fmt.Sprintf("Progressing %s/%s: %s", c.Status, c.Reason, c.Message))
	}
	if len(p.Waves) > 0 {
		var ws []string
		for _, w := range p.Waves {
			ws = append(ws, fmt.Sprintf("%s %d nodes %d updated %d available", waveName(w.Wave), w.Nodes, w.Updated, w.Available))
		}
		parts = append(parts, fmt.Sprintf("waves by %s: %s", p.WaveKey, strings.Join(ws, ", ")))
	}
	return strings.Join(parts, "; ") + p.unavailableSuffix()
}

// Block is the progress as a terminal shows it: a bar, the condition, a line per wave.
func (p Progress) Block() []string {
	const width = 30
	filled := width
	if p.Desired > 0 {
		filled = int(int64(width) * int64(min(p.Updated, p.Desired)) / int64(p.Desired))
	}
	head := fmt.Sprintf("daemonset/%s [%s%s] %d/%d updated, %d/%d available", p.Name,
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), p.Updated, p.Desired, p.Available, p.Desired)
	if !p.Observed() {
		head += fmt.Sprintf(" (the controller has not seen generation %d yet)", p.Generation)
	}
	lines := []string{head}
	if c := p.Condition; c != nil {
		lines = append(lines, fmt.Sprintf("  Progressing %s/%s: %s", c.Status, c.Reason, c.Message))
	}
	for _, w := range p.Waves {
		lines = append(lines, fmt.Sprintf("  wave %s=%s: %d nodes, %d updated, %d available", p.WaveKey, waveName(w.Wave), w.Nodes, w.Updated, w.Available))
	}
	return lines
}

// Status prints a DaemonSet's rollout progress: a RollingUpdate's, or that of an
// OnDelete DaemonSet everynode rolls out (daemon.CompanionManages). With Watch it follows the rollout and
// returns nil once it is complete; an error when the rollout fails (its Progressing
// condition is False: failed, rolled back, invalid annotation), the Timeout passes or
// the DaemonSet is deleted. Without Watch it prints the progress once, and fails only
// for a failed rollout.
func Status(ctx context.Context, client kubernetes.Interface, ns, name string, o StatusOptions) error {
	if o.Now == nil {
		o.Now = time.Now
	}
	ds, err := GetDaemonSet(ctx, client, ns, name)
	if err != nil {
		return err
	}
	if t := ds.Spec.UpdateStrategy.Type; t != apps.RollingUpdateDaemonSetStrategyType && !daemon.CompanionManages(ds) {
		return fmt.Errorf("daemonset/%s uses updateStrategy %s, which has no rollout to follow: its pods change only when they are deleted; annotate it %s to have everynode roll it out",
			name, t, daemon.AnnotationMaxUnavailable)
	}
	if !o.Watch {
		p, err := Look(ctx, client, ds, o.Now())
		if err != nil {
			return err
		}
		p.LookUnavailable(ctx, client, ds, o.Now())
		fmt.Fprintln(o.Out, p.Line())
		if p.Failure != "" {
			return errors.New(p.Failure)
		}
		return nil
	}

	wctx := ctx
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	store, changed, stop := watchDaemonSet(wctx, client, ns, name)
	defer stop()
	refresh := o.Refresh
	if refresh <= 0 {
		refresh = 2 * time.Second
	}
	tick := time.NewTicker(refresh)
	defer tick.Stop()
	out := &liveWriter{out: o.Out, tty: o.Terminal, width: o.Width}
	defer out.done()
	last := Progress{Name: name}
	synced := false
	for {
		if synced {
			obj, ok, _ := store.GetByKey(ns + "/" + name)
			if !ok {
				return fmt.Errorf("daemonset/%s was deleted from namespace %s", name, ns)
			}
			p, err := Look(wctx, client, obj.(*apps.DaemonSet), o.Now())
			if err != nil && wctx.Err() == nil {
				return err
			}
			if err == nil {
				last = p
				if o.Terminal {
					out.show(p.Block())
				} else {
					out.show([]string{p.Line()})
				}
				if p.Failure != "" {
					return errors.New(p.Failure)
				}
				if p.Complete() {
					out.done()
					fmt.Fprintf(o.Out, "daemonset %q successfully rolled out\n", name)
					return nil
				}
			}
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return fmt.Errorf("stopped watching daemonset/%s: %v", name, ctx.Err())
			}
			if obj, ok, _ := store.GetByKey(ns + "/" + name); ok {
				look, cancel := context.WithTimeout(ctx, 10*time.Second)
				last.LookUnavailable(look, client, obj.(*apps.DaemonSet), o.Now())
				cancel()
			}
			return fmt.Errorf("timed out after %v waiting for the rollout of daemonset/%s: %d of %d updated, %d of %d available%s%s; raise --timeout to wait longer",
				o.Timeout, name, last.Updated, last.Desired, last.Available, last.Desired, last.unavailableSuffix(), conditionSuffix(last.Condition))
		case <-changed:
			synced = true
		case <-tick.C:
		}
	}
}

func conditionSuffix(c *apps.DaemonSetCondition) string {
	if c == nil {
		return ""
	}
	return fmt.Sprintf(" (Progressing %s/%s: %s)", c.Status, c.Reason, c.Message)
}

// watchDaemonSet keeps a cache of DaemonSet ns/name. changed receives true once the
// cache has synced and after each change (it may drop signals that are already
// pending). stop ends the watch.
func watchDaemonSet(ctx context.Context, client kubernetes.Interface, ns, name string) (cache.Store, <-chan bool, func()) {
	ctx, stop := context.WithCancel(ctx)
	changed := make(chan bool, 1)
	notify := func() {
		select {
		case changed <- true:
		default:
		}
	}
	byName := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = byName
			return client.AppsV1().DaemonSets(ns).List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = byName
			return client.AppsV1().DaemonSets(ns).Watch(ctx, opts)
		},
	}, client)
	store, inf := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &apps.DaemonSet{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { notify() },
			UpdateFunc: func(any, any) { notify() },
			DeleteFunc: func(any) { notify() },
		},
	})
	go inf.RunWithContext(ctx)
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			notify()
		}
	}()
	return store, changed, stop
}

// liveWriter shows the latest progress: redrawn in place on a terminal, printed only
// when it changed elsewhere.
type liveWriter struct {
	out   io.Writer
	tty   bool
	width int
	shown int // lines drawn last, on a terminal
	last  string
}

func (l *liveWriter) show(lines []string) {
	if l.tty && l.width > 1 {
		for i, s := range lines {
			if r := []rune(s); len(r) > l.width-1 {
				lines[i] = string(r[:l.width-1])
			}
		}
	}
	text := strings.Join(lines, "\n")
	if text == l.last {
		return
	}
	l.last = text
	if !l.tty {
		fmt.Fprintln(l.out, text)
		return
	}
	// Back to the start of what was drawn last, cleared to the end of the screen.
	if l.shown > 1 {
		fmt.Fprintf(l.out, "\r\x1b[%dA\x1b[J", l.shown-1)
	} else if l.shown == 1 {
		fmt.Fprint(l.out, "\r\x1b[J")
	}
	fmt.Fprint(l.out, text)
	l.shown = len(lines)
}

// done leaves the cursor below what was drawn.
func (l *liveWriter) done() {
	if l.tty && l.shown > 0 {
		fmt.Fprintln(l.out)
	}
	l.shown = 0
}
