package clusterapi

import (
	"context"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
)

// Cluster API names that say a group is paused or rolling out (upstream's keys).
const (
	// PausedAnnotation, with any value, on a MachineDeployment, MachineSet
	// or MachinePool stops Cluster API's controllers reconciling it; such a
	// group is not a node group while it is there.
	PausedAnnotation = "cluster.x-k8s.io/paused"
	// RevisionAnnotation is the MachineDeployment revision a MachineSet
	// stands for; the newest revision is the MachineDeployment's spec.
	RevisionAnnotation = "machinedeployment.clusters.x-k8s.io/revision"
	// DeploymentNameLabel names a MachineSet's (and Machine's) MachineDeployment.
	DeploymentNameLabel = "cluster.x-k8s.io/deployment-name"
)

// paused reports whether obj, a scalable resource, carries PausedAnnotation.
// Only the object's own annotation counts, as upstream: neither the
// Cluster's spec.paused nor a MachineDeployment's spec.paused (which pauses
// its rollouts only).
func paused(obj *unstructured.Unstructured) bool {
	switch obj.GetKind() {
	case kindMachineDeployment, kindMachineSet, kindMachinePool:
		_, ok := obj.GetAnnotations()[PausedAnnotation]
		return ok
	}
	return false
}

// setsOfDeployment picks, from the MachineSets of a namespace, those of
// MachineDeployment md: owned by it, or labelled with its name (upstream's
// selector). Either is enough, so no MachineSet of it is missed.
func setsOfDeployment(group string, md *unstructured.Unstructured, sets []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, ms := range sets {
		if ms.GetNamespace() != md.GetNamespace() {
			continue
		}
		if ownerOfKind(ms, group, kindMachineDeployment) == md.GetName() || ms.GetLabels()[DeploymentNameLabel] == md.GetName() {
			out = append(out, ms)
		}
	}
	return out
}

// rollingOut says why the MachineDeployment of sets is rolling out (being
// upgraded), as upstream decides it: a MachineSet that is not of the newest
// revision (RevisionAnnotation; one without it never is) still has
// replicas, in spec.replicas or status.replicas. It returns "" when none
// has, and an error when a revision or a replica count cannot be read.
func rollingOut(sets []*unstructured.Unstructured) (string, error) {
	newest := int64(-1)
	revisions := make([]int64, len(sets))
	for i, ms := range sets {
		revisions[i] = -1
		s, ok := ms.GetAnnotations()[RevisionAnnotation]
		if !ok {
			continue
		}
		r, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return "", fmt.Errorf("revision %q of MachineSet %s/%s: %w", s, ms.GetNamespace(), ms.GetName(), err)
		}
		revisions[i] = r
		newest = max(newest, r)
	}
	for i, ms := range sets {
		if revisions[i] >= 0 && revisions[i] == newest {
			continue
		}
		for _, field := range []string{"spec", "status"} {
			n, found, err := unstructured.NestedInt64(ms.Object, field, "replicas")
			if err != nil {
				return "", fmt.Errorf("%s.replicas of MachineSet %s/%s: %w", field, ms.GetNamespace(), ms.GetName(), err)
			}
			if found && n > 0 {
				return fmt.Sprintf("rolling out: MachineSet %s/%s of an older revision still has %s.replicas %d",
					ms.GetNamespace(), ms.GetName(), field, n), nil
			}
		}
	}
	return "", nil
}

// ScaleDownBlocked implements cloudprovider.ScaleDownBlocker: the nodes of a
// MachineDeployment that is rolling out are not scaled down (upstream's
// scale-down upgrade processor), as of the last Refresh. When that cannot
// be told, they are not either.
func (g *NodeGroup) ScaleDownBlocked(ctx context.Context) string {
	if g.kind != kindMachineDeployment {
		return ""
	}
	logger := klog.FromContext(ctx)
	why, err := rollingOut(g.sets)
	if err != nil {
		logger.Error(err, "Failed to determine rolling out status for MachineDeployment; its nodes are not scaled down", "nodeGroup", g.Id())
		return "cannot tell whether the MachineDeployment is rolling out: " + err.Error()
	}
	if why != "" {
		logger.V(4).Info("MachineDeployment is rolling out; its nodes are not scaled down", "nodeGroup", g.Id(), "why", why)
	}
	return why
}

// deletionBlocked reads the group's object, and a MachineDeployment's
// MachineSets, from the API server (not the loop's snapshot: a drain may
// have taken minutes since) and says why no node of it may be deleted now:
// it is paused, or a MachineDeployment rolling out, or what the server
// says cannot be read. "" lets the deletion go on.
func (g *NodeGroup) deletionBlocked(ctx context.Context) string {
	ns := g.obj.GetNamespace()
	cur, err := g.provider.client.Resource(g.provider.gvr(g.kind)).Namespace(ns).Get(ctx, g.obj.GetName(), metav1.GetOptions{})
	if err != nil {
		return fmt.Sprintf("cannot read %s %s/%s to check it is not paused: %v", g.kind, ns, g.obj.GetName(), err)
	}
	if paused(cur) {
		return fmt.Sprintf("%s %s/%s is paused (annotation %s)", g.kind, ns, g.obj.GetName(), PausedAnnotation)
	}
	if g.kind != kindMachineDeployment {
		return ""
	}
	list, err := g.provider.client.Resource(g.provider.gvr(kindMachineSet)).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Sprintf("cannot list the MachineSets of MachineDeployment %s/%s to check it is not rolling out: %v", ns, g.obj.GetName(), err)
	}
	sets := make([]*unstructured.Unstructured, 0, len(list.Items))
	for i := range list.Items {
		sets = append(sets, &list.Items[i])
	}
	why, err := rollingOut(setsOfDeployment(g.provider.group, cur, sets))
	if err != nil {
		return "cannot tell whether the MachineDeployment is rolling out: " + err.Error()
	}
	if why != "" {
		return fmt.Sprintf("MachineDeployment %s/%s is %s", ns, g.obj.GetName(), why)
	}
	return ""
}
