package lifecycle

import (
	"context"
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/podutil"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// RunRelease is a node that a ProvisioningRequest's scale-up made, for a
// request with a run limit (maxRunDurationSeconds).
type RunRelease struct {
	// Namespace and Name are the request's.
	Namespace, Name string
	// Provisioned is when the request became Provisioned: its nodes
	// existed by then, so a node of the same name created later is not one
	// of them.
	Provisioned time.Time
	// RevokeAt is when the run limit passes; from GraceEnd on the node is
	// released even with the request's pods still on it.
	RevokeAt, GraceEnd time.Time
	// Revoked: the limit passed and the request's capacity was revoked.
	Revoked bool
}

// RunReleases lists the nodes of requests with a run limit, by node name
// (the ProvisioningRequest processor's, as the builder adapts it).
type RunReleases func() map[string]RunRelease

// RunLimit proposes, for the disruption.MaxRunDuration reason, the nodes of
// ProvisioningRequests whose run limit passed: each once none of the
// request's pods (those consuming it) runs on it any more, or from the end
// of the grace on. Nothing replaces them: the capacity was the request's.
// Only nodes the request's records name are proposed, and only if they
// existed when it was provisioned; the engine drains them as for any
// voluntary reason (PDBs, do-not-disrupt, budgets).
type RunLimit struct {
	releases RunReleases
}

var _ disruption.Source = (*RunLimit)(nil)

// NewRunLimit returns the run-limit source over releases.
func NewRunLimit(releases RunReleases) *RunLimit { return &RunLimit{releases: releases} }

// Reason implements disruption.Source.
func (s *RunLimit) Reason() disruption.Reason { return disruption.MaxRunDuration }

// Propose implements disruption.Source, the earliest revoked first.
func (s *RunLimit) Propose(ctx context.Context, loop *processors.Loop) []disruption.Candidate {
	rels := s.releases()
	if len(rels) == 0 {
		return nil
	}
	logger := klog.FromContext(ctx)
	var out []proposal
	for _, n := range loop.Nodes {
		rel, ok := rels[n.Name]
		if !ok || !rel.Revoked || n.DeletionTimestamp != nil {
			continue
		}
		if n.CreationTimestamp.Time.After(rel.Provisioned) {
			logger.V(2).Info("Node named as a ProvisioningRequest's was created after the request was provisioned; not released",
				"node", klog.KObj(n), "provisioningRequest", klog.KRef(rel.Namespace, rel.Name))
			continue
		}
		left := requestPodsOn(loop.ScheduledPods, n.Name, rel)
		if left > 0 && loop.Now.Before(rel.GraceEnd) {
			continue
		}
		msg := fmt.Sprintf("ProvisioningRequest %s/%s's maxRunDurationSeconds passed at %s; none of its pods is left on the node",
			rel.Namespace, rel.Name, rel.RevokeAt.UTC().Format(time.RFC3339))
		if left > 0 {
			msg = fmt.Sprintf("ProvisioningRequest %s/%s's maxRunDurationSeconds passed at %s and the grace ended at %s; %d of its pods are drained",
				rel.Namespace, rel.Name, rel.RevokeAt.UTC().Format(time.RFC3339), rel.GraceEnd.UTC().Format(time.RFC3339), left)
		}
		out = append(out, proposal{created: rel.RevokeAt, candidate: disruption.Candidate{
			Reason: disruption.MaxRunDuration, Nodes: []string{n.Name}, Message: msg}})
	}
	return oldestFirst(out)
}

// Explain says, for a node of a request with a run limit that is not
// proposed (yet), when it will be; "" for any other node.
func (s *RunLimit) Explain(loop *processors.Loop, node string) string {
	rel, ok := s.releases()[node]
	if !ok {
		return ""
	}
	name := rel.Namespace + "/" + rel.Name
	if !rel.Revoked {
		return fmt.Sprintf("a node of ProvisioningRequest %s, whose maxRunDurationSeconds passes at %s: released then once its pods are gone, at the latest from %s",
			name, rel.RevokeAt.UTC().Format(time.RFC3339), rel.GraceEnd.UTC().Format(time.RFC3339))
	}
	left := requestPodsOn(loop.ScheduledPods, node, rel)
	return fmt.Sprintf("a node of ProvisioningRequest %s, whose maxRunDurationSeconds passed at %s: released once its %d pods on it are gone, at the latest from %s",
		name, rel.RevokeAt.UTC().Format(time.RFC3339), left, rel.GraceEnd.UTC().Format(time.RFC3339))
}

// requestPodsOn counts the pods on node that consume rel's request and
// have not finished.
func requestPodsOn(pods []*apiv1.Pod, node string, rel RunRelease) int {
	n := 0
	for _, p := range pods {
		if p.Spec.NodeName != node || p.Namespace != rel.Namespace || p.Status.Phase == apiv1.PodSucceeded ||
			p.Status.Phase == apiv1.PodFailed {
			continue
		}
		if name, ok := podutil.ConsumedRequestName(p); ok && name == rel.Name {
			n++
		}
	}
	return n
}
