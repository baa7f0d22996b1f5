package daemon

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestDaemonPodTolerations(t *testing.T) {
	sec := int64(300)
	custom := v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "infra", Effect: v1.TaintEffectNoSchedule}
	notReadyWithSeconds := v1.Toleration{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: &sec}
	notReadyOtherEffect := v1.Toleration{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}

	tests := []struct {
		name string
		spec v1.PodSpec
		want []v1.Toleration
	}{
		{name: "defaults appended to an empty list",
			want: defaultTolerations},
		{name: "template tolerations kept first, defaults appended",
			spec: v1.PodSpec{Tolerations: []v1.Toleration{custom}},
			want: append([]v1.Toleration{custom}, defaultTolerations...)},
		{name: "matching template toleration replaced in place (loses tolerationSeconds)",
			spec: v1.PodSpec{Tolerations: []v1.Toleration{custom, notReadyWithSeconds}},
			want: append([]v1.Toleration{custom, defaultTolerations[0]}, defaultTolerations[1:]...)},
		{name: "same key with another effect is not a match",
			spec: v1.PodSpec{Tolerations: []v1.Toleration{notReadyOtherEffect}},
			want: append([]v1.Toleration{notReadyOtherEffect}, defaultTolerations...)},
		{name: "identical default not duplicated",
			spec: v1.PodSpec{Tolerations: []v1.Toleration{defaultTolerations[3]}},
			want: append([]v1.Toleration{defaultTolerations[3]}, append(append([]v1.Toleration{}, defaultTolerations[:3]...), defaultTolerations[4:]...)...)},
		{name: "hostNetwork adds network-unavailable",
			spec: v1.PodSpec{HostNetwork: true},
			want: append(append([]v1.Toleration{}, defaultTolerations...), hostNetworkToleration)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.spec.DeepCopy()
			got := DaemonPodTolerations(&tt.spec)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("DaemonPodTolerations =\n%v\nwant\n%v", got, tt.want)
			}
			if !reflect.DeepEqual(before, &tt.spec) {
				t.Errorf("template modified: %v, was %v", tt.spec.Tolerations, before.Tolerations)
			}
		})
	}
}

func TestDaemonPodTolerationsDoesNotAliasTemplate(t *testing.T) {
	sec := int64(30)
	spec := v1.PodSpec{Tolerations: make([]v1.Toleration, 1, 10)}
	spec.Tolerations[0] = v1.Toleration{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: &sec}
	got := DaemonPodTolerations(&spec)
	got[0].Key = "changed"
	if spec.Tolerations[0].Key != v1.TaintNodeUnreachable || spec.Tolerations[0].TolerationSeconds == nil {
		t.Errorf("template toleration changed through the result: %+v", spec.Tolerations[0])
	}
	if spare := spec.Tolerations[:2][1]; spare.Key != "" {
		t.Errorf("template's spare capacity written: %+v", spare)
	}
}

func TestDefaultTolerationsHaveNoSeconds(t *testing.T) {
	for _, tol := range append(append([]v1.Toleration{}, defaultTolerations...), hostNetworkToleration) {
		if tol.Operator != v1.TolerationOpExists || tol.TolerationSeconds != nil {
			t.Errorf("default toleration %+v: want Exists without tolerationSeconds", tol)
		}
	}
}
