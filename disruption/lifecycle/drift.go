package lifecycle

import (
	"context"

	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// Drift proposes the nodes whose group reports them drifted
// (cloudprovider.DriftDetector) for the drifted reason, each replaced by
// one new node of its own group. Groups that do not implement
// DriftDetector never drift.
type Drift struct {
	groups GroupLookup
}

var _ disruption.Source = (*Drift)(nil)

// NewDrift returns the drift source.
func NewDrift(groups GroupLookup) *Drift {
	return &Drift{groups: groups}
}

// Reason implements disruption.Source.
func (d *Drift) Reason() disruption.Reason { return disruption.Drifted }

// Propose implements disruption.Source: every eligible node its group
// reports drifted, the oldest first. DriftDetector implementations answer
// from memory, so every node is asked every loop, with no cap on the calls.
// An error means not drifted (logged at V(4)).
func (d *Drift) Propose(ctx context.Context, loop *processors.Loop) []disruption.Candidate {
	logger := klog.FromContext(ctx)
	var out []proposal
	for _, gn := range eligible(ctx, d.groups, loop.Nodes, "drift") {
		detector, ok := gn.group.(cloudprovider.DriftDetector)
		if !ok {
			continue
		}
		id := gn.group.Id()
		drifted, why, err := detector.Drifted(ctx, gn.node)
		if err != nil {
			logger.V(4).Info("Drift unknown, node taken as not drifted", "node", klog.KObj(gn.node), "nodeGroup", id, "err", err)
			continue
		}
		if !drifted {
			continue
		}
		msg := "node drifted from the template of node group " + id
		if why != "" {
			msg += ": " + why
		}
		logger.V(4).Info("Node drifted", "node", klog.KObj(gn.node), "nodeGroup", id, "why", why)
		out = append(out, proposal{created: gn.node.CreationTimestamp.Time, candidate: disruption.Candidate{
			Reason:      disruption.Drifted,
			Nodes:       []string{gn.node.Name},
			Replacement: []disruption.Replacement{{Group: id, Count: 1}},
			Message:     msg,
		}})
	}
	return oldestFirst(out)
}
