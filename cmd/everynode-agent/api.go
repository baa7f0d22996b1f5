package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// serviceAccountDir is where the kubelet mounts a pod's service account token and
// the cluster's CA certificate.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// probeAPI asks the API server for its version as the pod's service account, the
// way an in-cluster client finds it (KUBERNETES_SERVICE_HOST and _PORT, the token
// and CA in dir), and prints the answer: 0 when it answers 200, 1 when not.
func probeAPI(dir string) int {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		fmt.Println("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set")
		return 1
	}
	token, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		fmt.Println("no certificate in", filepath.Join(dir, "ca.crt"))
		return 1
	}
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	req, err := http.NewRequest(http.MethodGet, "https://"+net.JoinHostPort(host, port)+"/version", nil)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	fmt.Printf("%s %s\n", resp.Status, strings.Join(strings.Fields(string(body)), " "))
	if resp.StatusCode != http.StatusOK {
		return 1
	}
	return 0
}
