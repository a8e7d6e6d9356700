package controller

import (
	"context"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// TemplateGetter reads PodTemplates (an informer cache).
type TemplateGetter interface {
	Get(namespace, name string) (*apiv1.PodTemplate, error)
}

// APITemplates reads PodTemplates through get and writes the ones the
// controller keeps through the API as FieldManager (the controller's
// Templates).
type APITemplates struct {
	TemplateGetter
	api typedcorev1.CoreV1Interface
}

// NewAPITemplates reads through get and writes through api.
func NewAPITemplates(get TemplateGetter, api typedcorev1.CoreV1Interface) APITemplates {
	return APITemplates{TemplateGetter: get, api: api}
}

// Create creates pt.
func (t APITemplates) Create(ctx context.Context, pt *apiv1.PodTemplate) (*apiv1.PodTemplate, error) {
	return t.api.PodTemplates(pt.Namespace).Create(ctx, pt, metav1.CreateOptions{FieldManager: FieldManager})
}

// Update updates pt.
func (t APITemplates) Update(ctx context.Context, pt *apiv1.PodTemplate) (*apiv1.PodTemplate, error) {
	return t.api.PodTemplates(pt.Namespace).Update(ctx, pt, metav1.UpdateOptions{FieldManager: FieldManager})
}

// ResourceQuotas lists a namespace's ResourceQuotas from an informer cache
// (the controller's Quotas).
type ResourceQuotas struct {
	lister corelisters.ResourceQuotaLister
}

// NewResourceQuotas lists from lister.
func NewResourceQuotas(lister corelisters.ResourceQuotaLister) ResourceQuotas {
	return ResourceQuotas{lister: lister}
}

// List lists namespace's ResourceQuotas.
func (q ResourceQuotas) List(namespace string) ([]*apiv1.ResourceQuota, error) {
	return q.lister.ResourceQuotas(namespace).List(labels.Everything())
}
