package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/everynode/everynode/internal/component"
)

// LabelReal marks the Nodes that real kubelets registered; the value is "true".
const LabelReal = "sim.everynode.dev/real"

// kubeletConfig is the kubelet's configuration for a node. Besides the paths and
// the node's address, it differs from kubelet's defaults where a sandbox needs it:
//   - cgroup v1 with the cgroupfs driver, under the node's own cgroup;
//   - no eviction, image garbage collection or node allocatable enforcement: the
//     node shares a disk and memory with the host and every other node, and their
//     use says nothing about this node;
//   - any client on the node's private link may use the kubelet's API (logs, exec),
//     which only the host and the node can reach;
//   - no swap check and no resolv.conf from the host: pods resolve nothing.
func kubeletConfig(n *Node) ([]byte, error) {
	c := kubeletv1beta1.KubeletConfiguration{
		TypeMeta:                 metav1.TypeMeta{APIVersion: "kubelet.config.k8s.io/v1beta1", Kind: "KubeletConfiguration"},
		FailCgroupV1:             ptr.To(false),
		CgroupDriver:             "cgroupfs",
		CgroupRoot:               n.cgroup(""),
		ContainerRuntimeEndpoint: "unix://" + containerdSocket,
		Address:                  n.link.NodeIP.String(),
		ReadOnlyPort:             0,
		HealthzBindAddress:       "127.0.0.1",
		Authentication: kubeletv1beta1.KubeletAuthentication{
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(true)},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(false)},
		},
		Authorization:                 kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow},
		FailSwapOn:                    ptr.To(false),
		ImageGCHighThresholdPercent:   ptr.To[int32](100),
		EvictionHard:                  map[string]string{"memory.available": "0%", "nodefs.available": "0%", "imagefs.available": "0%"},
		EnforceNodeAllocatable:        []string{},
		SerializeImagePulls:           ptr.To(false),
		ResolverConfig:                ptr.To(""),
		LocalStorageCapacityIsolation: ptr.To(false),
		PodLogsDir:                    n.path("pod-logs"),
		VolumePluginDir:               kubeletRootDir + "/volume-plugins",
	}
	return yaml.Marshal(c)
}

// kubeletKubeconfig is how the kubelet reaches the API server: through the forwarder
// on the host's end of the node's link, verifying the server's certificate for
// localhost, the name the sandbox's certificate carries.
func kubeletKubeconfig(n *Node) clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["sandbox"] = &clientcmdapi.Cluster{
		Server:                   fmt.Sprintf("https://%s:%d", n.link.HostIP, n.opts.APIPort),
		CertificateAuthorityData: n.opts.CA,
		TLSServerName:            "localhost",
	}
	cfg.AuthInfos["kubelet"] = &clientcmdapi.AuthInfo{Token: n.opts.Token}
	cfg.Contexts["sandbox"] = &clientcmdapi.Context{Cluster: "sandbox", AuthInfo: "kubelet"}
	cfg.CurrentContext = "sandbox"
	return *cfg
}

// startKubelet starts this binary's kubelet component in the node's namespaces and
// kubelet cgroup.
func (n *Node) startKubelet(ctx context.Context) error {
	config, err := kubeletConfig(n)
	if err != nil {
		return err
	}
	if err := os.WriteFile(n.path("kubelet.yaml"), config, 0o600); err != nil {
		return err
	}
	if err := clientcmd.WriteToFile(kubeletKubeconfig(n), n.path("kubelet.kubeconfig")); err != nil {
		return err
	}
	self, err := component.Self()
	if err != nil {
		return err
	}
	cmd := exec.Command("nsenter", "--target", strconv.Itoa(n.containerd.Pid()), "--mount", "--net", "--",
		self, component.Command, InitCommand, "--cgroup", n.cgroup("kubelet"), "--argv0", "kubelet", "--",
		self, component.Command, "kubelet",
		"--config="+n.path("kubelet.yaml"),
		"--kubeconfig="+n.path("kubelet.kubeconfig"),
		"--root-dir="+kubeletRootDir,
		"--hostname-override="+n.Name,
		"--node-ip="+n.link.NodeIP.String(),
		"--node-labels="+LabelReal+"=true",
		"--v=0",
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // see startContainerd
	c, err := component.StartCommand(ctx, n.Name+"/kubelet", cmd, n.log("kubelet"))
	if err != nil {
		return err
	}
	n.kubelet = c
	return nil
}
