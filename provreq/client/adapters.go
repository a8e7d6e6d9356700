package client

import (
	"context"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"

	v1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
)

// FieldManager is the field manager of the autoscaler's status writes.
const FieldManager = "cluster-autoscaler"

// StatusWriter writes request statuses by server-side apply as the
// autoscaler's field manager, and deletes requests by UID (the processor's
// StatusWriter).
type StatusWriter struct{ c *Client }

// NewStatusWriter writes through c.
func NewStatusWriter(c *Client) StatusWriter { return StatusWriter{c: c} }

// ApplyStatus applies status to the request namespace/name.
func (s StatusWriter) ApplyStatus(ctx context.Context, namespace, name string, status v1.ProvisioningRequestStatus) error {
	_, err := s.c.ProvisioningRequests(namespace).ApplyStatus(ctx, name, status,
		metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	return err
}

// Delete deletes the request namespace/name if its UID is still uid.
func (s StatusWriter) Delete(ctx context.Context, namespace, name string, uid types.UID) error {
	return s.c.ProvisioningRequests(namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
}

// PodTemplates reads the requests' PodTemplates from an informer cache.
type PodTemplates struct{ lister corelisters.PodTemplateLister }

// NewPodTemplates reads from lister.
func NewPodTemplates(lister corelisters.PodTemplateLister) PodTemplates {
	return PodTemplates{lister: lister}
}

// Get returns the PodTemplate namespace/name.
func (t PodTemplates) Get(namespace, name string) (*apiv1.PodTemplate, error) {
	return t.lister.PodTemplates(namespace).Get(name)
}
