package builder

import (
	"k8s.io/autoscaler/cluster-autoscaler/disruption/lifecycle"
	"k8s.io/autoscaler/cluster-autoscaler/provreq/processor"
)

// runLimitSource is the disruption engine's source for the nodes of
// ProvisioningRequests whose maxRunDurationSeconds passed, over the
// processor's RunReleases.
func runLimitSource(p *processor.Processor) *lifecycle.RunLimit {
	return lifecycle.NewRunLimit(func() map[string]lifecycle.RunRelease {
		rels := p.RunReleases()
		if len(rels) == 0 {
			return nil
		}
		out := make(map[string]lifecycle.RunRelease, len(rels))
		for node, r := range rels {
			out[node] = lifecycle.RunRelease{Namespace: r.Namespace, Name: r.Name, Provisioned: r.Provisioned,
				RevokeAt: r.RevokeAt, GraceEnd: r.GraceEnd, Revoked: r.Revoked}
		}
		return out
	})
}
