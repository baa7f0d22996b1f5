package nodesim

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// minRestartEvery keeps a crash-looping pod from turning into a stream of writes.
const minRestartEvery = time.Second

// Behaviour is what a pod's annotations ask of the simulated kubelet.
type Behaviour struct {
	// ReadyAfter is how long after its start the pod stays Pending.
	ReadyAfter time.Duration
	// EndPhase, when Failed or Succeeded, is where the pod ends once ReadyAfter passed.
	EndPhase v1.PodPhase
	// NeverReady keeps the pod Running but not Ready.
	NeverReady bool
	// RestartEvery, when positive, crashes the pod's containers at that interval
	// (with an OOMKilled failure, only the containers it names).
	RestartEvery time.Duration
	// Failures are the container failures the pod plays.
	Failures []Failure
	// StopAfter, when positive, is how long the containers take to stop once the
	// pod is deleted (0: the node's stop delay).
	StopAfter time.Duration
}

// Recovery is how long a crashed pod stays not Ready before its containers run again.
func (b Behaviour) Recovery() time.Duration {
	return min(time.Second, b.crashEvery()/2)
}

// crashEvery is the interval the pod's containers crash at (0: never).
func (b Behaviour) crashEvery() time.Duration {
	if b.RestartEvery == 0 && b.oomKills() {
		return defaultOOMEvery
	}
	return b.RestartEvery
}

// parseBehaviour reads a pod's annotations. An invalid value is reported in errs
// and treated as absent; readyDelay is the ready delay when none is given.
func parseBehaviour(annotations map[string]string, readyDelay time.Duration) (b Behaviour, errs []error) {
	b.ReadyAfter = readyDelay
	if s, ok := annotations[AnnotationReadyAfter]; ok {
		if d, err := time.ParseDuration(s); err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a non-negative duration such as 5s", AnnotationReadyAfter, s))
		} else {
			b.ReadyAfter = d
		}
	}
	if s, ok := annotations[AnnotationPhase]; ok {
		switch {
		case strings.EqualFold(s, string(v1.PodFailed)):
			b.EndPhase = v1.PodFailed
		case strings.EqualFold(s, string(v1.PodSucceeded)):
			b.EndPhase = v1.PodSucceeded
		default:
			errs = append(errs, fmt.Errorf("%s=%q: want Failed or Succeeded", AnnotationPhase, s))
		}
	}
	if s, ok := annotations[AnnotationReady]; ok {
		if ready, err := strconv.ParseBool(s); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: want true or false", AnnotationReady, s))
		} else {
			b.NeverReady = !ready
		}
	}
	if s, ok := annotations[AnnotationRestartEvery]; ok {
		if d, err := time.ParseDuration(s); err != nil || d < minRestartEvery {
			errs = append(errs, fmt.Errorf("%s=%q: want a duration of at least %v", AnnotationRestartEvery, s, minRestartEvery))
		} else {
			b.RestartEvery = d
		}
	}
	if s, ok := annotations[AnnotationStopAfter]; ok {
		if d, err := time.ParseDuration(s); err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a positive duration such as 3s", AnnotationStopAfter, s))
		} else {
			b.StopAfter = d
		}
	}
	if s, ok := annotations[AnnotationFail]; ok {
		if fs, err := parseFailures(s); err != nil {
			errs = append(errs, err)
		} else {
			b.Failures = fs
		}
	}
	return b, errs
}

// behaviourSignature captures the annotations parseBehaviour reads, so a pod is
// parsed again only when one of them changes.
func behaviourSignature(annotations map[string]string) string {
	var sb strings.Builder
	for _, k := range []string{AnnotationReadyAfter, AnnotationPhase, AnnotationReady, AnnotationRestartEvery, AnnotationFail, AnnotationStopAfter} {
		if v, ok := annotations[k]; ok {
			sb.WriteString(strconv.Quote(v))
		}
		sb.WriteByte(0)
	}
	return sb.String()
}

// behaviours caches each pod's parsed Behaviour, keyed by pod namespace/name.
type behaviours struct {
	readyDelay time.Duration
	mu         sync.Mutex
	byPod      map[string]parsedBehaviour
}

type parsedBehaviour struct {
	uid       types.UID
	signature string
	behaviour Behaviour
}

func newBehaviours(readyDelay time.Duration) *behaviours {
	return &behaviours{readyDelay: readyDelay, byPod: map[string]parsedBehaviour{}}
}

// of returns the pod's Behaviour, parsing (and logging invalid annotations) only
// the first time the pod, or its relevant annotations, are seen.
func (c *behaviours) of(logger klog.Logger, key string, pod *v1.Pod) Behaviour {
	sig := behaviourSignature(pod.Annotations)
	c.mu.Lock()
	defer c.mu.Unlock()
	if got, ok := c.byPod[key]; ok && got.uid == pod.UID && got.signature == sig {
		return got.behaviour
	}
	b, errs := parseBehaviour(pod.Annotations, c.readyDelay)
	var unfit []error
	b.Failures, unfit = checkFailures(b.Failures, pod)
	errs = append(errs, unfit...)
	for _, err := range errs {
		logger.Info("Ignoring invalid simulation annotation", "pod", klog.KObj(pod), "err", err)
	}
	c.byPod[key] = parsedBehaviour{uid: pod.UID, signature: sig, behaviour: b}
	return b
}

// forget drops a pod that is gone.
func (c *behaviours) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byPod, key)
}
