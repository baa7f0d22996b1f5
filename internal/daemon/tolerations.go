package daemon

import v1 "k8s.io/api/core/v1"

// defaultTolerations are added to every daemon pod so that node conditions which
// would evict or repel ordinary pods do not affect it. Each is an Exists toleration
// without tolerationSeconds.
var defaultTolerations = []v1.Toleration{
	{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
	{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
	{Key: v1.TaintNodeDiskPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
	{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
	{Key: v1.TaintNodePIDPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
	{Key: v1.TaintNodeUnschedulable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
}

// hostNetworkToleration is added only to pods on the host network, which do not need
// the pod network to be up.
var hostNetworkToleration = v1.Toleration{
	Key: v1.TaintNodeNetworkUnavailable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule,
}

// DaemonPodTolerations returns spec's tolerations with the daemon defaults merged in,
// without modifying spec. A template toleration with the same key, operator, value and
// effect as a default is replaced by the default (so it loses any tolerationSeconds);
// all others are kept in their order, and missing defaults are appended.
func DaemonPodTolerations(spec *v1.PodSpec) []v1.Toleration {
	out := make([]v1.Toleration, len(spec.Tolerations), len(spec.Tolerations)+len(defaultTolerations)+1)
	copy(out, spec.Tolerations)
	for i := range defaultTolerations {
		out = mergeToleration(out, defaultTolerations[i])
	}
	if spec.HostNetwork {
		out = mergeToleration(out, hostNetworkToleration)
	}
	return out
}

func mergeToleration(list []v1.Toleration, t v1.Toleration) []v1.Toleration {
	replaced := false
	for i := range list {
		if t.MatchToleration(&list[i]) {
			list[i] = t
			replaced = true
		}
	}
	if !replaced {
		list = append(list, t)
	}
	return list
}
