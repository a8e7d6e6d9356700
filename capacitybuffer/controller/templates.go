package controller

import (
	"context"
	"fmt"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/capacitybuffer"
	v1 "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/apis/autoscaling.x-k8s.io/v1beta1"
)

// keepTemplate makes the PodTemplate the controller keeps for b
// (capacitybuffer-<name>-pod-template, owned by b so that it goes with it)
// hold shape, and returns it. A PodTemplate of that name that b does not
// own is left alone and reported.
func (c *Controller) keepTemplate(ctx context.Context, b *v1.CapacityBuffer, shape apiv1.PodTemplateSpec) (*apiv1.PodTemplate, *capacitybuffer.Problem, error) {
	name := capacitybuffer.ManagedTemplateName(b.Name)
	notWritten := func(err error) *capacitybuffer.Problem {
		return &capacitybuffer.Problem{Reason: capacitybuffer.ReasonPodTemplateNotWritten,
			Message: fmt.Sprintf("writing PodTemplate %q: %v", name, err)}
	}
	cur, err := c.templates.Get(b.Namespace, name)
	switch {
	case apierrors.IsNotFound(err):
		pt := &apiv1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.Namespace,
			OwnerReferences: []metav1.OwnerReference{capacitybuffer.OwnerReference(b)}}, Template: shape}
		created, err := c.templates.Create(ctx, pt)
		if apierrors.IsAlreadyExists(err) {
			return nil, nil, fmt.Errorf("PodTemplate %s/%s exists but is not in the cache yet: %w", b.Namespace, name, err)
		}
		if err != nil {
			return nil, notWritten(err), nil
		}
		return created, nil, nil
	case err != nil:
		return nil, nil, err
	case !metav1.IsControlledBy(cur, b):
		return nil, &capacitybuffer.Problem{Reason: capacitybuffer.ReasonPodTemplateNotWritten,
			Message: fmt.Sprintf("PodTemplate %q exists and is not controlled by this buffer; delete or rename it", name)}, nil
	case equality.Semantic.DeepEqual(cur.Template, shape):
		return cur, nil, nil
	}
	upd := cur.DeepCopy()
	upd.Template = shape
	updated, err := c.templates.Update(ctx, upd)
	if apierrors.IsConflict(err) {
		return nil, nil, err
	}
	if err != nil {
		return nil, notWritten(err), nil
	}
	return updated, nil, nil
}
