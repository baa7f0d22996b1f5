package nodesim

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// nextRenewal is how long until a node's next lease renewal. Each node renews at
// a stable phase of the interval derived from its name, so the renewals of many
// nodes spread evenly over it. The wait is at least interval/2 and less than
// 1.5·interval; in the steady state it is the interval.
func nextRenewal(name string, now time.Time, interval time.Duration) time.Duration {
	h := fnv.New64a()
	h.Write([]byte(name))
	phase := int64(h.Sum64() % uint64(interval))
	since := (now.UnixNano() - phase) % int64(interval)
	if since < 0 {
		since += int64(interval)
	}
	wait := interval - time.Duration(since)
	if wait < interval/2 {
		wait += interval
	}
	return wait
}

// leaseCache holds the last Lease written for each node, so a renewal is one
// update rather than a read and an update.
type leaseCache struct {
	mu     sync.Mutex
	byNode map[string]*coordinationv1.Lease
}

func newLeaseCache() *leaseCache {
	return &leaseCache{byNode: map[string]*coordinationv1.Lease{}}
}

func (c *leaseCache) get(node string) *coordinationv1.Lease {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byNode[node]
}

func (c *leaseCache) put(l *coordinationv1.Lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byNode[l.Name] = l
}

func (c *leaseCache) forget(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byNode, node)
}

// syncLease renews the Lease of a simulated node and says when to renew it next.
// A node that is gone or no longer simulated is dropped from the rotation.
func (s *Simulator) syncLease(ctx context.Context, name string) (time.Duration, error) {
	node := s.simulatedNode(name)
	if node == nil {
		s.leases.forget(name)
		return 0, nil
	}
	if stopped, _ := kubeletStopped(node); stopped {
		// Kept in the rotation, not renewed: the Lease expires as a dead kubelet's.
		return nextRenewal(name, s.clock.Now(), s.cfg.LeaseInterval), nil
	}
	lease, err := s.renewLease(ctx, node, s.clock.Now())
	if err != nil {
		s.leases.forget(name)
		return 0, err
	}
	s.leases.put(lease)
	klog.FromContext(ctx).V(5).Info("Renewed node lease", "node", klog.KObj(node))
	return nextRenewal(name, s.clock.Now(), s.cfg.LeaseInterval), nil
}

func (s *Simulator) renewLease(ctx context.Context, node *v1.Node, now time.Time) (*coordinationv1.Lease, error) {
	leases := s.client.CoordinationV1().Leases(LeaseNamespace)
	base := s.leases.get(node.Name)
	if base == nil {
		got, err := leases.Get(ctx, node.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: node.Name, Namespace: LeaseNamespace}}
			setLeaseSpec(lease, node, now)
			created, err := leases.Create(ctx, lease, metav1.CreateOptions{})
			if err != nil {
				return nil, fmt.Errorf("creating lease of node %s: %w", node.Name, err)
			}
			return created, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading lease of node %s: %w", node.Name, err)
		}
		base = got
	}
	lease := base.DeepCopy()
	setLeaseSpec(lease, node, now)
	updated, err := leases.Update(ctx, lease, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("renewing lease of node %s: %w", node.Name, err)
	}
	return updated, nil
}

// setLeaseSpec makes lease the node's heartbeat, renewed at now and owned by the node.
func setLeaseSpec(lease *coordinationv1.Lease, node *v1.Node, now time.Time) {
	lease.Spec.HolderIdentity = ptr.To(node.Name)
	lease.Spec.LeaseDurationSeconds = ptr.To[int32](LeaseDurationSeconds)
	lease.Spec.RenewTime = &metav1.MicroTime{Time: now}
	for _, ref := range lease.OwnerReferences {
		if ref.UID == node.UID {
			return
		}
	}
	lease.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "v1",
		Kind:       "Node",
		Name:       node.Name,
		UID:        node.UID,
	}}
}
