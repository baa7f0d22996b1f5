package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/everynode/everynode/internal/component"
)

// ports are etcd's loopback ports, chosen free on the first start and kept for later
// starts, since etcd records its peer address with its data.
type ports struct {
	EtcdClient int `json:"etcdClient"`
	EtcdPeer   int `json:"etcdPeer"`
}

func loadPorts(p paths) (ports, error) {
	var pt ports
	if data, err := os.ReadFile(p.state()); err == nil {
		// Equal ports never served (etcd cannot bind both), so new ones are safe.
		if err := json.Unmarshal(data, &pt); err == nil && pt.EtcdClient > 0 && pt.EtcdPeer > 0 && pt.EtcdClient != pt.EtcdPeer {
			return pt, nil
		}
	}
	free, err := component.FreePorts(2)
	if err != nil {
		return pt, err
	}
	pt.EtcdClient, pt.EtcdPeer = free[0], free[1]
	data, _ := json.Marshal(pt)
	return pt, writeSecret(p.state(), data)
}

// startEtcd runs a single-member etcd in this process. Its logs go to the sandbox's
// log directory.
func startEtcd(ctx context.Context, p paths, pt ports) (*embed.Etcd, string, error) {
	cfg := embed.NewConfig()
	cfg.Name = "sandbox"
	cfg.Dir = p.etcd()
	client := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", pt.EtcdClient)}
	peer := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", pt.EtcdPeer)}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{p.logs("etcd")}
	// A sandbox favours speed over durability across power loss.
	cfg.UnsafeNoFsync = true
	cfg.QuotaBackendBytes = 8 << 30
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("starting etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, client.String(), nil
	case err := <-e.Err():
		e.Close()
		return nil, "", fmt.Errorf("etcd stopped while starting: %w", err)
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, "", fmt.Errorf("etcd did not become ready within a minute; see %s", p.logs("etcd"))
	case <-ctx.Done():
		e.Close()
		return nil, "", ctx.Err()
	}
}
