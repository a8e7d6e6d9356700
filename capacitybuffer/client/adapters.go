package client

import (
	"context"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"

	v1 "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/apis/autoscaling.x-k8s.io/v1beta1"
)

// StatusWriter applies a buffer's status as one field manager (the
// injector's and the controller's StatusWriter).
type StatusWriter struct {
	c       *Client
	manager string
}

// NewStatusWriter writes through c as the field manager manager.
func NewStatusWriter(c *Client, manager string) StatusWriter {
	return StatusWriter{c: c, manager: manager}
}

// ApplyStatus applies status to the buffer namespace/name.
func (s StatusWriter) ApplyStatus(ctx context.Context, namespace, name string, status v1.CapacityBufferStatus) error {
	_, err := s.c.CapacityBuffers(namespace).ApplyStatus(ctx, name, status,
		metav1.ApplyOptions{FieldManager: s.manager, Force: true})
	return err
}

// PodTemplates reads the buffers' PodTemplates from an informer cache.
type PodTemplates struct{ lister corelisters.PodTemplateLister }

// NewPodTemplates reads from lister.
func NewPodTemplates(lister corelisters.PodTemplateLister) PodTemplates {
	return PodTemplates{lister: lister}
}

// Get returns the PodTemplate namespace/name.
func (t PodTemplates) Get(namespace, name string) (*apiv1.PodTemplate, error) {
	return t.lister.PodTemplates(namespace).Get(name)
}
