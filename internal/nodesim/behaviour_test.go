package nodesim

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
)

func TestParseBehaviour(t *testing.T) {
	const delay = 2 * time.Second
	tests := []struct {
		name        string
		annotations map[string]string
		want        Behaviour
		wantErrs    int
	}{
		{"no annotations: the configured delay", nil, Behaviour{ReadyAfter: delay}, 0},
		{"ready-after overrides the delay", map[string]string{AnnotationReadyAfter: "5s"}, Behaviour{ReadyAfter: 5 * time.Second}, 0},
		{"ready-after zero is immediate", map[string]string{AnnotationReadyAfter: "0s"}, Behaviour{}, 0},
		{"ready-after invalid is ignored", map[string]string{AnnotationReadyAfter: "soon"}, Behaviour{ReadyAfter: delay}, 1},
		{"ready-after negative is ignored", map[string]string{AnnotationReadyAfter: "-1s"}, Behaviour{ReadyAfter: delay}, 1},
		{"phase Failed", map[string]string{AnnotationPhase: "Failed"}, Behaviour{ReadyAfter: delay, EndPhase: v1.PodFailed}, 0},
		{"phase Succeeded, any case", map[string]string{AnnotationPhase: "succeeded"}, Behaviour{ReadyAfter: delay, EndPhase: v1.PodSucceeded}, 0},
		{"phase Running is not an end", map[string]string{AnnotationPhase: "Running"}, Behaviour{ReadyAfter: delay}, 1},
		{"ready false: never ready", map[string]string{AnnotationReady: "false"}, Behaviour{ReadyAfter: delay, NeverReady: true}, 0},
		{"ready true: as usual", map[string]string{AnnotationReady: "true"}, Behaviour{ReadyAfter: delay}, 0},
		{"ready invalid is ignored", map[string]string{AnnotationReady: "nope"}, Behaviour{ReadyAfter: delay}, 1},
		{"restart-every", map[string]string{AnnotationRestartEvery: "30s"}, Behaviour{ReadyAfter: delay, RestartEvery: 30 * time.Second}, 0},
		{"restart-every below a second is ignored", map[string]string{AnnotationRestartEvery: "10ms"}, Behaviour{ReadyAfter: delay}, 1},
		{"restart-every invalid is ignored", map[string]string{AnnotationRestartEvery: "often"}, Behaviour{ReadyAfter: delay}, 1},
		{"fail", map[string]string{AnnotationFail: "app=OOMKilled"}, Behaviour{ReadyAfter: delay, Failures: []Failure{{Container: "app", Reason: FailOOMKilled}}}, 0},
		{"fail invalid is ignored", map[string]string{AnnotationFail: "Crash"}, Behaviour{ReadyAfter: delay}, 1},
		{"stop-after", map[string]string{AnnotationStopAfter: "3s"}, Behaviour{ReadyAfter: delay, StopAfter: 3 * time.Second}, 0},
		{"stop-after zero is ignored", map[string]string{AnnotationStopAfter: "0s"}, Behaviour{ReadyAfter: delay}, 1},
		{"knobs combine; one bad one does not spoil the rest", map[string]string{
			AnnotationReadyAfter: "1m", AnnotationReady: "false", AnnotationRestartEvery: "10s", AnnotationPhase: "Paused",
		}, Behaviour{ReadyAfter: time.Minute, NeverReady: true, RestartEvery: 10 * time.Second}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := parseBehaviour(tt.annotations, delay)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("behaviour (-want +got):\n%s", diff)
			}
			if len(errs) != tt.wantErrs {
				t.Errorf("errors = %v, want %d", errs, tt.wantErrs)
			}
		})
	}
}

func TestBehaviourRecovery(t *testing.T) {
	for every, want := range map[time.Duration]time.Duration{
		time.Second:      500 * time.Millisecond,
		2 * time.Second:  time.Second,
		10 * time.Second: time.Second,
	} {
		if got := (Behaviour{RestartEvery: every}).Recovery(); got != want {
			t.Errorf("Recovery() with restart-every %v = %v, want %v", every, got, want)
		}
	}
}

func TestBehavioursLogInvalidOnce(t *testing.T) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	c := newBehaviours(time.Second)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1",
		Annotations: map[string]string{AnnotationReadyAfter: "soon"}}}
	for range 3 {
		if got := c.of(logger, "ns/p", pod); got.ReadyAfter != time.Second {
			t.Fatalf("invalid ready-after not ignored: %+v", got)
		}
	}
	pod.Annotations["unrelated"] = "x"
	c.of(logger, "ns/p", pod)
	buffer := logger.GetSink().(ktesting.Underlier).GetBuffer()
	if n := strings.Count(buffer.String(), "Ignoring invalid simulation annotation"); n != 1 {
		t.Fatalf("logged %d times, want once:\n%s", n, buffer.String())
	}
	pod.Annotations[AnnotationReadyAfter] = "later"
	c.of(logger, "ns/p", pod)
	if n := strings.Count(buffer.String(), "Ignoring invalid simulation annotation"); n != 2 {
		t.Fatalf("a new invalid value was logged %d times in all, want 2", n)
	}
	pod.Annotations[AnnotationReadyAfter] = "3s"
	if got := c.of(logger, "ns/p", pod); got.ReadyAfter != 3*time.Second {
		t.Fatalf("a changed annotation is parsed again: %+v", got)
	}
}
