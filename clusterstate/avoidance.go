package clusterstate

import (
	"context"
	"time"

	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// holdAvoided asks a provider that avoids capacity
// (cloudprovider.CapacityAvoider) which groups to hold backed off, and
// holds those of groups (the groups it lists now; others are skipped with
// a log line) until the time it gives. A hold is not a failure: it is not
// among Failures, and a group's exponential back-off is left as it is.
// r.mu is held.
func (r *Registry) holdAvoided(ctx context.Context, provider cloudprovider.CloudProvider, groups map[string]*GroupState,
	now time.Time) {
	a, ok := provider.(cloudprovider.CapacityAvoider)
	if !ok {
		return
	}
	logger := klog.FromContext(ctx)
	holds := map[string]Hold{}
	for _, g := range a.AvoidedGroups(now) {
		if groups[g.Group] == nil {
			logger.V(2).Info("Avoided capacity of an unknown node group; skipped", "nodeGroup", g.Group, "errorCode", g.ErrorCode)
			continue
		}
		if !now.Before(g.Until) {
			continue
		}
		holds[g.Group] = Hold{Reason: BackoffReason{ErrorCode: g.ErrorCode, ErrorMessage: g.ErrorMessage}, Until: g.Until}
		if old, had := r.holds[g.Group]; !had || !old.Until.Equal(g.Until) {
			logger.Info("Node group held backed off: the provider avoids its capacity", "nodeGroup", g.Group,
				"errorCode", g.ErrorCode, "until", g.Until, "why", g.ErrorMessage)
		}
	}
	r.backoff.SetHolds(holds, now)
	r.holds = holds
}
