package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/everynode/everynode/internal/nodesim"
	"github.com/everynode/everynode/internal/realnode"
)

// fidelityScenario is one behaviour run on a simulated and a real node at once: a
// DaemonSet on both, its template telling each node what to do (the simulated one by
// its annotations, the real one by its image, environment and probes).
type fidelityScenario struct {
	name string
	// template shapes the DaemonSet's pod template.
	template func(*v1.PodTemplateSpec)
	// then changes the template once both pods are settled (nil: no change).
	then func(*v1.PodTemplateSpec)
	// remove deletes both pods once settled and compares their ends.
	remove bool
	// settled tells when a node's pod shows the behaviour.
	settled func(v1.Pod) bool
}

// TestRealNodeFidelity runs each scenario on a simulated and a real node of one
// sandbox and compares what the API shows of their pods, field by field. It writes
// the comparison to the artifacts directory (fidelity.md) and fails on a difference
// not listed in fidelityExplained.
func TestRealNodeFidelity(t *testing.T) {
	realNodesWanted(t)
	rn := newRealNodeSandbox(t, []string{"sandbox", "--nodes", "1", "--real-nodes", "1"})
	rn.start(t)
	client := rn.client

	running := func(p v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready
	}
	waiting := func(reasons ...string) func(v1.Pod) bool {
		return func(p v1.Pod) bool {
			if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Waiting == nil {
				return false
			}
			return containsAny(p.Status.ContainerStatuses[0].State.Waiting.Reason, reasons)
		}
	}
	// Between two runs of a crash-looping container: restarted n times, the last run
	// ended for one of reasons, not running now.
	crashedAtLeast := func(n int32, reasons ...string) func(v1.Pod) bool {
		return func(p v1.Pod) bool {
			if len(p.Status.ContainerStatuses) != 1 {
				return false
			}
			s := p.Status.ContainerStatuses[0]
			return s.RestartCount >= n && s.State.Running == nil &&
				s.LastTerminationState.Terminated != nil && containsAny(s.LastTerminationState.Terminated.Reason, reasons)
		}
	}
	scenarios := []fidelityScenario{
		{name: "a pod starts and turns Ready", settled: running},
		{
			name: "the image changes in place",
			then: func(p *v1.PodTemplateSpec) { p.Spec.Containers[0].Image = realnode.AgentImage2 },
			settled: func(p v1.Pod) bool {
				return running(p) && p.Status.ContainerStatuses[0].Image == realnode.AgentImage2
			},
		},
		{
			name: "a container crash-loops",
			template: func(p *v1.PodTemplateSpec) {
				p.Annotations = map[string]string{nodesim.AnnotationRestartEvery: "2s"}
				p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "AGENT_EXIT_AFTER", Value: "2s"}, {Name: "AGENT_EXIT_CODE", Value: "3"}}
			},
			settled: crashedAtLeast(2, "Error"),
		},
		{
			name: "a container is killed for memory",
			template: func(p *v1.PodTemplateSpec) {
				p.Annotations = map[string]string{nodesim.AnnotationFail: "OOMKilled"}
				c := &p.Spec.Containers[0]
				c.Env = []v1.EnvVar{{Name: "AGENT_ALLOC_MB", Value: "8"}}
				c.Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("32Mi")}
			},
			settled: crashedAtLeast(2, "OOMKilled"),
		},
		{
			name: "an image cannot be pulled",
			template: func(p *v1.PodTemplateSpec) {
				p.Annotations = map[string]string{nodesim.AnnotationFail: "ErrImagePull"}
				c := &p.Spec.Containers[0]
				c.Image, c.ImagePullPolicy = "everynode.local/agent:missing", v1.PullIfNotPresent
			},
			settled: waiting("ImagePullBackOff"),
		},
		{
			name: "resources are resized in place",
			template: func(p *v1.PodTemplateSpec) {
				p.Spec.Containers[0].Resources = guaranteed("100m", "64Mi")
			},
			then: func(p *v1.PodTemplateSpec) { p.Spec.Containers[0].Resources = guaranteed("200m", "96Mi") },
			settled: func(p v1.Pod) bool {
				if !running(p) || p.Status.ContainerStatuses[0].Resources == nil {
					return false
				}
				return p.Status.ContainerStatuses[0].Resources.Requests.Cpu().MilliValue() == 200
			},
		},
		{
			name: "a pod is deleted and its container takes 3s to stop",
			template: func(p *v1.PodTemplateSpec) {
				p.Annotations = map[string]string{nodesim.AnnotationStopAfter: "3s"}
				p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
				p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "AGENT_STOP_DELAY", Value: "3s"}}
			},
			remove:  true,
			settled: running,
		},
		{
			name: "a pod is deleted and its container is killed at the end of a 2s grace",
			template: func(p *v1.PodTemplateSpec) {
				p.Annotations = map[string]string{nodesim.AnnotationStopAfter: "10s"}
				p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](2)
				p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "AGENT_STOP_DELAY", Value: "10s"}}
			},
			remove:  true,
			settled: running,
		},
		{
			name: "a readiness probe fails",
			template: func(p *v1.PodTemplateSpec) {
				p.Annotations = map[string]string{nodesim.AnnotationReady: "false"}
				p.Spec.Containers[0].ReadinessProbe = &v1.Probe{
					ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"/everynode-agent", "probe", "/never"}}},
					PeriodSeconds: 1,
				}
			},
			settled: func(p v1.Pod) bool {
				return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil &&
					time.Since(p.Status.ContainerStatuses[0].State.Running.StartedAt.Time) > 5*time.Second
			},
		},
	}

	var table fidelityTable
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			ns := realNamespace(t, client)
			ds := daemonSet(ns, "agent", nil)
			ds.Annotations = map[string]string{annInPlace: "true"}
			c := &ds.Spec.Template.Spec.Containers[0]
			c.Image, c.ImagePullPolicy = realnode.AgentImage1, v1.PullNever
			if sc.template != nil {
				sc.template(&ds.Spec.Template)
			}
			createAgent(t, client, ds)
			switch {
			case sc.then != nil:
				first := waitBothSettled(t, client, ns, running)
				rec := recordPods(t, client, ns)
				setTemplate(t, client, ns, "agent", sc.then)
				second := waitBothSettled(t, client, ns, sc.settled)
				facts := map[string]map[string]string{}
				for node, pod := range second {
					if pod.UID != first[node].UID {
						t.Errorf("on %s the change replaced the pod", node)
					}
					facts[node] = podFacts(pod)
					facts[node]["conditions seen"] = rec.seenConditions(pod.UID)
				}
				table.addFacts(sc.name, facts)
			case sc.remove:
				pods := waitBothSettled(t, client, ns, sc.settled)
				rec := recordPods(t, client, ns)
				deleted := map[string]time.Time{}
				for node, pod := range pods {
					if err := client.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
					deleted[node] = time.Now()
				}
				facts := map[string]map[string]string{}
				for node, pod := range pods {
					facts[node] = removalFacts(rec, t, pod, deleted[node])
				}
				table.addFacts(sc.name, facts)
			default:
				table.add(sc.name, waitBothSettled(t, client, ns, sc.settled))
			}
		})
	}
	path := filepath.Join(artifactsDir(t), "fidelity.md")
	if err := os.WriteFile(path, []byte(table.markdown()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("the comparison is in %s:\n%s", path, table.markdown())
	for _, row := range table.rows {
		if row.real != row.sim && row.explained() == "" {
			t.Errorf("%s, %s: real node %q, simulated %q", row.scenario, row.field, row.real, row.sim)
		}
	}
}

// fidelityExplained are the differences between a simulated and a real node that
// are known, and why, by field or by "scenario: field".
var fidelityExplained = map[string]string{
	"containerID scheme":                      "a simulated node names its runtime nodesim, so that tools can tell it from a real one",
	"imageID":                                 "a real node reports the ID of an image imported without a registry (sha256:…); a simulated one makes up a registry digest",
	"a container crash-loops: lastState":      "the simulator cannot know a program's exit code: its crash-looping containers exit 1",
	"a container crash-loops: state":          "between restarts the kubelet mostly shows the last run as terminated, and waiting in CrashLoopBackOff after a sync during the back-off; the simulator shows the latter",
	"a container is killed for memory: state": "as for a crash loop: terminated (OOMKilled) or waiting in CrashLoopBackOff between restarts",
}

// waitBothSettled waits until the DaemonSet has one pod on each of the two nodes and
// both show settled; it returns them by kind of node ("real", "simulated").
func waitBothSettled(t *testing.T, client kubernetes.Interface, ns string, settled func(v1.Pod) bool) map[string]v1.Pod {
	t.Helper()
	var byKind map[string]v1.Pod
	realWait(t, "a settled pod on the real and the simulated node", func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=agent"})
		if err != nil {
			return false, err
		}
		byKind = map[string]v1.Pod{}
		for _, p := range pods.Items {
			kind := "simulated"
			if p.Spec.NodeName == realnode.NodeName(1) {
				kind = "real"
			}
			if p.DeletionTimestamp == nil && settled(p) {
				byKind[kind] = p
			}
		}
		return len(byKind) == 2, nil
	})
	return byKind
}

// podFacts are what the API shows of a pod, each field rendered so that two nodes
// doing the same show the same text (times become durations or presence).
func podFacts(p v1.Pod) map[string]string {
	f := map[string]string{"phase": string(p.Status.Phase), "qosClass": string(p.Status.QOSClass)}
	var conds []string
	for _, c := range p.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s", c.Type, c.Status)+reasonSuffix(c.Reason))
	}
	f["conditions (in order)"] = strings.Join(conds, " ")
	f["podIP set"] = fmt.Sprint(p.Status.PodIP != "")
	f["hostIP set"] = fmt.Sprint(p.Status.HostIP != "")
	f["startTime set"] = fmt.Sprint(p.Status.StartTime != nil)
	f["scheduled to Ready"] = readyDelay(p)
	if len(p.Status.ContainerStatuses) == 1 {
		s := p.Status.ContainerStatuses[0]
		f["ready"] = fmt.Sprint(s.Ready)
		f["started"] = fmt.Sprint(s.Started != nil && *s.Started)
		f["restartCount"] = restartBucket(s.RestartCount)
		f["state"] = stateText(s.State)
		f["lastState"] = stateText(s.LastTerminationState)
		f["image"] = s.Image
		scheme, _, _ := strings.Cut(s.ContainerID, "://")
		f["containerID scheme"] = scheme
		f["imageID"] = imageIDForm(s.ImageID)
		f["allocatedResources set"] = fmt.Sprint(len(s.AllocatedResources) > 0)
		f["resources set"] = fmt.Sprint(s.Resources != nil)
		if s.Resources != nil {
			f["resources"] = fmt.Sprintf("requests %v, limits %v", resourceText(s.Resources.Requests), resourceText(s.Resources.Limits))
		}
	}
	return f
}

// readyDelay renders how long the pod took from its binding to Ready, coarsely: the
// simulated node's delay is a flag, the real one's the time a container takes.
func readyDelay(p v1.Pod) string {
	scheduled, ready := podCondition(p, v1.PodScheduled), podCondition(p, v1.PodReady)
	switch {
	case ready.Status != v1.ConditionTrue:
		return "not Ready"
	case ready.LastTransitionTime.Sub(scheduled.LastTransitionTime.Time) < 5*time.Second:
		return "under 5s"
	}
	return "5s or more"
}

// resourceText renders CPU and memory quantities, as "cpu=200m memory=96Mi".
func resourceText(l v1.ResourceList) string {
	var parts []string
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		if q, ok := l[name]; ok {
			parts = append(parts, fmt.Sprintf("%s=%s", name, q.String()))
		}
	}
	return strings.Join(parts, " ")
}

// guaranteed are requests and limits of cpu and memory, equal.
func guaranteed(cpu, memory string) v1.ResourceRequirements {
	l := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(memory)}
	return v1.ResourceRequirements{Requests: l, Limits: l.DeepCopy()}
}

func reasonSuffix(reason string) string {
	if reason == "" {
		return ""
	}
	return "(" + reason + ")"
}

// restartBucket renders a restart count as 0, 1, or "2+": crash loops on the two
// nodes restart at their own pace.
func restartBucket(n int32) string {
	if n >= 2 {
		return "2+"
	}
	return fmt.Sprint(n)
}

func stateText(s v1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running"
	case s.Waiting != nil:
		return "waiting " + s.Waiting.Reason
	case s.Terminated != nil:
		return fmt.Sprintf("terminated %s exit %d", s.Terminated.Reason, s.Terminated.ExitCode)
	}
	return "none"
}

// imageIDForm is the shape of an image ID: repo@sha256:… or sha256:….
func imageIDForm(id string) string {
	if repo, _, ok := strings.Cut(id, "@"); ok {
		return repo + "@sha256:…"
	}
	if strings.HasPrefix(id, "sha256:") {
		return "sha256:…"
	}
	return id
}

// fidelityTable is the comparison, one row per scenario and field.
type fidelityTable struct{ rows []fidelityRow }

type fidelityRow struct{ scenario, field, real, sim string }

func (t *fidelityTable) add(scenario string, pods map[string]v1.Pod) {
	t.addFacts(scenario, map[string]map[string]string{"real": podFacts(pods["real"]), "simulated": podFacts(pods["simulated"])})
}

// addFacts adds the facts of a scenario by kind of node ("real", "simulated").
func (t *fidelityTable) addFacts(scenario string, facts map[string]map[string]string) {
	real, sim := facts["real"], facts["simulated"]
	var fields []string
	for k := range real {
		fields = append(fields, k)
	}
	for k := range sim {
		if _, ok := real[k]; !ok {
			fields = append(fields, k)
		}
	}
	sort.Strings(fields)
	for _, k := range fields {
		t.rows = append(t.rows, fidelityRow{scenario, k, real[k], sim[k]})
	}
}

// explained is why the row's values differ, if that is known.
func (r fidelityRow) explained() string {
	if why := fidelityExplained[r.scenario+": "+r.field]; why != "" {
		return why
	}
	return fidelityExplained[r.field]
}

func (t *fidelityTable) markdown() string {
	var b strings.Builder
	b.WriteString("| scenario | field | real node | simulated node | match |\n|---|---|---|---|---|\n")
	for _, r := range t.rows {
		match := "yes"
		if r.real != r.sim {
			match = "no"
			if why := r.explained(); why != "" {
				match = "no: " + why
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.scenario, r.field, r.real, r.sim, match)
	}
	return b.String()
}
