package sandbox

import (
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes the admin kubeconfig of a sandbox, which its components use
// too. The CA certificate is embedded, so the file works wherever it is read from or
// copied to.
func writeKubeconfig(path, server string, cr credentials) error {
	ca, err := os.ReadFile(cr.caFile)
	if err != nil {
		return fmt.Errorf("reading the sandbox's CA certificate: %w", err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["sandbox"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: cr.token}
	cfg.Contexts["everynode-sandbox"] = &clientcmdapi.Context{Cluster: "sandbox", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "everynode-sandbox"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	return nil
}

// restConfig is the admin client configuration of a running sandbox.
func restConfig(server string, cr credentials) *rest.Config {
	return &rest.Config{
		Host:            server,
		BearerToken:     cr.token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: cr.caFile},
		QPS:             -1,
		UserAgent:       "everynode-sandbox",
	}
}
