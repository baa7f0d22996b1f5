package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// credentials are the sandbox's secrets, created on first start and reused after.
type credentials struct {
	caFile, certFile, keyFile string // API server serving certificate (self-signed)
	saKeyFile                 string // service account token signing key
	tokenFile                 string // static token file for the API server
	token                     string // the admin's bearer token
}

func ensureCredentials(p paths) (credentials, error) {
	if err := os.MkdirAll(p.pki(""), 0o700); err != nil {
		return credentials{}, fmt.Errorf("creating %s: %w", p.pki(""), err)
	}
	c := credentials{
		certFile:  p.pki("apiserver.crt"),
		keyFile:   p.pki("apiserver.key"),
		saKeyFile: p.pki("service-account.key"),
		tokenFile: p.pki("tokens.csv"),
	}
	c.caFile = c.certFile // self-signed: the bundle holds its own CA
	if !exists(c.certFile) || !exists(c.keyFile) || !servesAllNames(c.certFile) {
		certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("localhost", apiServerIPs, apiServerNames)
		if err != nil {
			return c, fmt.Errorf("generating serving certificate: %w", err)
		}
		if err := errors.Join(writeSecret(c.certFile, certPEM), writeSecret(c.keyFile, keyPEM)); err != nil {
			return c, err
		}
	}
	if _, _, err := keyutil.LoadOrGenerateKeyFile(c.saKeyFile); err != nil {
		return c, fmt.Errorf("service account key: %w", err)
	}
	if data, err := os.ReadFile(c.tokenFile); err == nil {
		c.token, _, _ = strings.Cut(string(data), ",")
	}
	if c.token == "" {
		buf := make([]byte, 24)
		if _, err := rand.Read(buf); err != nil {
			return c, fmt.Errorf("generating token: %w", err)
		}
		c.token = hex.EncodeToString(buf)
		line := fmt.Sprintf("%s,admin,admin,system:masters\n", c.token)
		if err := writeSecret(c.tokenFile, []byte(line)); err != nil {
			return c, err
		}
	}
	return c, nil
}

func writeSecret(path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Base(path), err)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// The addresses and names the API server's certificate is valid for: loopback, where
// the sandbox's clients reach it, and the kubernetes Service (its cluster IP, the
// first of --service-cluster-ip-range, and its DNS names), where pods on real nodes
// reach it.
var (
	apiServerIPs   = []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(serviceIP)}
	apiServerNames = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
)

// servesAllNames reports whether the certificate at path is valid for every address
// and name the API server needs; a data dir from before pods could reach it has one
// for loopback only, and gets a new one.
func servesAllNames(path string) bool {
	certs, err := cert.CertsFromFile(path)
	if err != nil || len(certs) == 0 {
		return false
	}
	leaf := certs[0]
	for _, ip := range apiServerIPs {
		if leaf.VerifyHostname(ip.String()) != nil {
			return false
		}
	}
	for _, name := range apiServerNames {
		if leaf.VerifyHostname(name) != nil {
			return false
		}
	}
	return true
}
