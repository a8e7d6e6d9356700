package framework

import (
	"fmt"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// AdminAccessNamespaceLabel is the label ("true") a namespace needs for its
// ResourceClaims to request admin access to devices: kube-apiserver refuses
// both creating such a claim (or template) elsewhere and writing its
// allocation (the scheduler's PreBind), so the pod would never start.
const AdminAccessNamespaceLabel = "resource.kubernetes.io/admin-access"

// holdsDevice reports whether an allocation result takes its device away
// from other claims: a result with admin access does not (kube-scheduler
// does not count it as allocated), so monitoring claims never block users.
func holdsDevice(r *resourceapi.DeviceRequestAllocationResult) bool {
	return r.AdminAccess == nil || !*r.AdminAccess
}

// requestsAdminAccess reports whether a claim asks for admin access.
func requestsAdminAccess(c *resourceapi.ResourceClaim) bool {
	for _, r := range c.Spec.Devices.Requests {
		if r.Exactly != nil && r.Exactly.AdminAccess != nil && *r.Exactly.AdminAccess {
			return true
		}
	}
	return false
}

// checkAdminAccess refuses pod (its template claims resolved, see
// podWithClaims) when one of its claims that is not allocated yet asks for
// admin access outside a namespace labelled AdminAccessNamespaceLabel:
// kube-apiserver would refuse the claim's allocation. An allocated claim
// was allowed when it was allocated and stays so.
func (h *Handle) checkAdminAccess(pod *apiv1.Pod) error {
	for _, pc := range pod.Spec.ResourceClaims {
		c, ok := h.snapshot.Claim(pod.Namespace, claimNameOf(pod, pc))
		if !ok || c.Status.Allocation != nil || !requestsAdminAccess(c) {
			continue
		}
		if err := adminNamespace(h.namespaces, pod.Namespace); err != nil {
			return fmt.Errorf("claim %q requests admin access: %w", pc.Name, err)
		}
	}
	return nil
}

// adminNamespace returns why namespace ns may not hold admin-access claims,
// nil when it may.
func adminNamespace(namespaces corelisters.NamespaceLister, ns string) error {
	if namespaces == nil {
		return fmt.Errorf("namespaces are not watched, the %s label of namespace %s is unknown", AdminAccessNamespaceLabel, ns)
	}
	obj, err := namespaces.Get(ns)
	if err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	if obj.Labels[AdminAccessNamespaceLabel] != "true" {
		return fmt.Errorf("namespace %s lacks the label %s=true that admin access to devices requires", ns, AdminAccessNamespaceLabel)
	}
	return nil
}
