package controller

import (
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"

	"k8s.io/autoscaler/cluster-autoscaler/capacitybuffer"
	v1 "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/apis/autoscaling.x-k8s.io/v1beta1"
)

// BufferHandler reconciles a buffer when it is created, when its spec
// changes (its generation), when the controller's condition is missing from
// its status, and at the informer's resyncs; a deleted buffer is forgotten.
func (c *Controller) BufferHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if b, ok := obj.(*v1.CapacityBuffer); ok {
				c.enqueue(b)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*v1.CapacityBuffer)
			b, ok2 := newObj.(*v1.CapacityBuffer)
			if !ok1 || !ok2 {
				return
			}
			if old.ResourceVersion == b.ResourceVersion || old.Generation != b.Generation ||
				meta.FindStatusCondition(b.Status.Conditions, capacitybuffer.ConditionReadyForProvisioning) == nil {
				c.enqueue(b)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if b, ok := obj.(*v1.CapacityBuffer); ok {
				c.forget(b.UID)
			}
		},
	}
}

// PodTemplateHandler reconciles the buffers of a PodTemplate's namespace
// that use it (spec.podTemplateRef) or own it (the template the controller
// keeps), when it is created, changed (its generation) or deleted.
func (c *Controller) PodTemplateHandler() cache.ResourceEventHandler {
	touched := func(obj any) {
		pt, ok := tombstone(obj).(*apiv1.PodTemplate)
		if !ok {
			return
		}
		c.enqueueWhere(pt.Namespace, func(b *v1.CapacityBuffer) bool {
			return (b.Spec.PodTemplateRef != nil && b.Spec.PodTemplateRef.Name == pt.Name) ||
				capacitybuffer.ManagedTemplateName(b.Name) == pt.Name
		})
	}
	return generationHandler(touched)
}

// ScalableHandler reconciles the buffers whose scalableRef names an object
// of group and kind when that object is created, changed (its generation:
// replicas and template are spec) or deleted. Register it on the informers
// of the kinds buffers commonly name; others are seen at the resyncs.
func (c *Controller) ScalableHandler(group, kind string) cache.ResourceEventHandler {
	touched := func(obj any) {
		o, err := meta.Accessor(tombstone(obj))
		if err != nil {
			return
		}
		c.enqueueWhere(o.GetNamespace(), func(b *v1.CapacityBuffer) bool {
			r := b.Spec.ScalableRef
			return r != nil && r.APIGroup == group && r.Kind == kind && r.Name == o.GetName()
		})
	}
	return generationHandler(touched)
}

// generationHandler calls touched on additions, deletions, and updates that
// change the object's generation.
func generationHandler(touched func(obj any)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: touched,
		UpdateFunc: func(oldObj, newObj any) {
			o, err1 := meta.Accessor(oldObj)
			n, err2 := meta.Accessor(newObj)
			if err1 == nil && err2 == nil && o.GetGeneration() != n.GetGeneration() {
				touched(newObj)
			}
		},
		DeleteFunc: touched,
	}
}

func tombstone(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

func (c *Controller) enqueueWhere(namespace string, match func(*v1.CapacityBuffer) bool) {
	buffers, err := c.buffers.InNamespace(namespace)
	if err != nil {
		return
	}
	for _, b := range buffers {
		if match(b) {
			c.enqueue(b)
		}
	}
}
