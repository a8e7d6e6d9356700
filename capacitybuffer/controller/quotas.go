package controller

import (
	"fmt"
	"strings"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/cache"

	"k8s.io/autoscaler/cluster-autoscaler/capacitybuffer"
	v1 "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/apis/autoscaling.x-k8s.io/v1beta1"
)

// Quotas lists the ResourceQuotas of a namespace (the informer's cache).
type Quotas interface {
	List(namespace string) ([]*apiv1.ResourceQuota, error)
}

// WithQuotas makes the controller fit buffers into their namespace's
// ResourceQuotas: a buffer's chunks are cut to what the quotas leave after
// the pods that run and the buffers created before it, and the
// LimitedByQuotas condition says so.
func WithQuotas(q Quotas) Option { return func(c *Controller) { c.quotas = q } }

// quotaCut is what the namespace's quotas did to a buffer's chunks.
type quotaCut struct {
	applies  bool // some quota limits what a chunk uses
	from, to int32
	limiting []string
}

// fitQuotas cuts count to the room the namespace's quotas leave for b,
// whose chunks are pods like pod.
func (c *Controller) fitQuotas(b *v1.CapacityBuffer, pod *apiv1.Pod, count int32) (quotaCut, error) {
	cut := quotaCut{from: count, to: count}
	if c.quotas == nil {
		return cut, nil
	}
	quotas, err := c.quotas.List(b.Namespace)
	if err != nil || len(quotas) == 0 {
		return cut, err
	}
	room, applies, limiting := capacitybuffer.QuotaRoom(quotas, c.heldBefore(b), capacitybuffer.QuotaUsage(pod))
	cut.applies = applies
	if room < count {
		cut.to, cut.limiting = room, limiting
	}
	return cut, nil
}

// heldBefore is what the ready buffers of b's namespace that come before it
// (older, or as old with a smaller name) hold, in quota resources, as their
// status says.
func (c *Controller) heldBefore(b *v1.CapacityBuffer) apiv1.ResourceList {
	held := apiv1.ResourceList{}
	others, err := c.buffers.InNamespace(b.Namespace)
	if err != nil {
		return held
	}
	for _, o := range others {
		if o.UID == b.UID || !before(o, b) || !capacitybuffer.Handled(o) || !capacitybuffer.Ready(o) {
			continue
		}
		pt, err := c.templates.Get(o.Namespace, o.Status.PodTemplateRef.Name)
		if err != nil {
			continue
		}
		capacitybuffer.Add(held, capacitybuffer.QuotaUsage(capacitybuffer.PodFromTemplate(o.Namespace, &pt.Template)),
			*o.Status.Replicas)
	}
	return held
}

// before orders the buffers of a namespace for the quotas: the older first,
// then by name.
func before(a, b *v1.CapacityBuffer) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

func (q quotaCut) message() string {
	if q.to < q.from {
		return fmt.Sprintf("%d chunks limited to %d by ResourceQuota %s", q.from, q.to, strings.Join(q.limiting, ", "))
	}
	return fmt.Sprintf("the namespace's ResourceQuotas leave room for all %d chunks", q.from)
}

// QuotaHandler reconciles the buffers of a namespace when one of its
// ResourceQuotas is created, deleted, or its status (hard, used) changes.
func (c *Controller) QuotaHandler() cache.ResourceEventHandler {
	touched := func(obj any) {
		if q, ok := tombstone(obj).(*apiv1.ResourceQuota); ok {
			c.enqueueWhere(q.Namespace, func(*v1.CapacityBuffer) bool { return true })
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: touched,
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*apiv1.ResourceQuota)
			n, ok2 := newObj.(*apiv1.ResourceQuota)
			if ok1 && ok2 && !equality.Semantic.DeepEqual(o.Status, n.Status) {
				touched(newObj)
			}
		},
		DeleteFunc: touched,
	}
}
