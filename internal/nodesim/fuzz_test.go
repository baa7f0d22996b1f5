package nodesim

import (
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// FuzzParseBehaviour: any values of the simulator's pod annotations. Parsing never
// panics; what it accepts is within its documented bounds; every error names its
// annotation, and an invalid value is treated as absent.
func FuzzParseBehaviour(f *testing.F) {
	f.Add("5s", "Failed", "false", "30s", "ErrImagePull")
	f.Add("-1s", "Running", "maybe", "10ms", "app=OOMKilled,init=InvalidImageName")
	f.Add("", "", "", "", "")
	f.Add("1h2m3.5s", "succeeded", "1", "9223372036s", "=,CreateContainerConfigError")
	f.Fuzz(func(t *testing.T, readyAfter, phase, ready, restartEvery, fail string) {
		ann := map[string]string{AnnotationReadyAfter: readyAfter, AnnotationPhase: phase, AnnotationReady: ready,
			AnnotationRestartEvery: restartEvery, AnnotationFail: fail}
		const readyDelay = 2 * time.Second
		b, errs := parseBehaviour(ann, readyDelay)
		if b.ReadyAfter < 0 {
			t.Fatalf("ready-after %q parsed to %v", readyAfter, b.ReadyAfter)
		}
		if b.RestartEvery != 0 && b.RestartEvery < minRestartEvery {
			t.Fatalf("restart-every %q parsed to %v, below %v", restartEvery, b.RestartEvery, minRestartEvery)
		}
		if b.EndPhase != "" && b.EndPhase != v1.PodFailed && b.EndPhase != v1.PodSucceeded {
			t.Fatalf("phase %q parsed to %q", phase, b.EndPhase)
		}
		for _, f := range b.Failures {
			if !slices.Contains(failReasons, f.Reason) || strings.ContainsAny(f.Container, ",=") {
				t.Fatalf("fail %q parsed to %+v", fail, f)
			}
		}
		for _, err := range errs {
			named := false
			for key := range ann {
				named = named || strings.Contains(err.Error(), key)
			}
			if !named {
				t.Fatalf("error %q names no annotation", err)
			}
			if strings.Contains(err.Error(), AnnotationReadyAfter) && b.ReadyAfter != readyDelay {
				t.Fatalf("an invalid ready-after %q was not treated as absent: %v", readyAfter, b.ReadyAfter)
			}
		}
	})
}
