package lifecycle

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// LifetimeFunc returns the maximum lifetime of group's nodes, given the
// default lifetime def; 0 means its nodes never expire. It is asked once
// per group and loop (e.g. from the group's GetOptions).
type LifetimeFunc func(ctx context.Context, group cloudprovider.NodeGroup, def time.Duration) time.Duration

// Expiry proposes the nodes older than their group's maximum lifetime
// (from the Node's creationTimestamp) for the expired reason, each replaced
// by one new node of its own group.
type Expiry struct {
	groups      GroupLookup
	lifetime    time.Duration
	lifetimeFor LifetimeFunc
}

var _ disruption.Source = (*Expiry)(nil)

// ExpiryOption configures an Expiry.
type ExpiryOption func(*Expiry)

// WithLifetimeFor sets the per-group lifetime; without it every group has
// the default.
func WithLifetimeFor(f LifetimeFunc) ExpiryOption {
	return func(e *Expiry) { e.lifetimeFor = f }
}

// NewExpiry returns the expiry source: nodes expire after lifetime (0: they
// do not, unless a per-group lifetime says otherwise).
func NewExpiry(groups GroupLookup, lifetime time.Duration, opts ...ExpiryOption) *Expiry {
	e := &Expiry{groups: groups, lifetime: max(lifetime, 0)}
	for _, o := range opts {
		o(e)
	}
	return e
}

// Reason implements disruption.Source.
func (e *Expiry) Reason() disruption.Reason { return disruption.Expired }

// Propose implements disruption.Source: every eligible node whose age at
// loop.Now is at least its group's lifetime, the oldest first. Evaluated
// every loop, a node is proposed in the first loop at or after its
// creation time plus the lifetime.
func (e *Expiry) Propose(ctx context.Context, loop *processors.Loop) []disruption.Candidate {
	if e.lifetime == 0 && e.lifetimeFor == nil {
		return nil
	}
	logger := klog.FromContext(ctx)
	lifetimes := map[string]time.Duration{}
	var out []proposal
	for _, gn := range eligible(ctx, e.groups, loop.Nodes, "expiry") {
		id := gn.group.Id()
		lifetime, ok := lifetimes[id]
		if !ok {
			lifetime = e.lifetime
			if e.lifetimeFor != nil {
				lifetime = max(e.lifetimeFor(ctx, gn.group, e.lifetime), 0)
			}
			lifetimes[id] = lifetime
		}
		created := gn.node.CreationTimestamp.Time
		if lifetime == 0 || created.IsZero() {
			continue
		}
		age := loop.Now.Sub(created)
		if age < lifetime {
			continue
		}
		msg := fmt.Sprintf("node is %s old, past the maximum lifetime of %s for node group %s",
			age.Truncate(time.Second), lifetime, id)
		logger.V(4).Info("Node expired", "node", klog.KObj(gn.node), "nodeGroup", id, "age", age, "lifetime", lifetime)
		out = append(out, proposal{created: created, candidate: disruption.Candidate{
			Reason:      disruption.Expired,
			Nodes:       []string{gn.node.Name},
			Replacement: []disruption.Replacement{{Group: id, Count: 1}},
			Message:     msg,
		}})
	}
	return oldestFirst(out)
}
