package capacityquota

import (
	"context"
	"encoding/json"
	"fmt"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// Used sums, for each resource the quota limits, what the nodes it picks
// have (capacity; "nodes" counts them).
func (q Quota) Used(nodes []*apiv1.Node) apiv1.ResourceList {
	milli := make(map[apiv1.ResourceName]int64, len(q.Limits))
	for res := range q.Limits {
		milli[res] = 0
	}
	for _, n := range nodes {
		if !q.Applies(n) {
			continue
		}
		for res := range q.Limits {
			milli[res] += Amount(n, res)
		}
	}
	out := make(apiv1.ResourceList, len(milli))
	for res, v := range milli {
		format := resource.DecimalSI
		if res == apiv1.ResourceMemory || res == apiv1.ResourceEphemeralStorage {
			format = resource.BinarySI
		}
		q := resource.NewMilliQuantity(v, format)
		if v%1000 == 0 {
			q = resource.NewQuantity(v/1000, format)
		}
		out[res] = *q
	}
	return out
}

// WriteStatus writes status.used of every valid quota whose value changed,
// from nodes (the cluster's Nodes as the informer has them). A failed write
// is logged and tried again the next time.
func (s *Source) WriteStatus(ctx context.Context, nodes []*apiv1.Node) {
	logger := klog.FromContext(ctx)
	for _, obj := range s.informer.GetStore().List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		cq := &CapacityQuota{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cq); err != nil {
			continue // Quotas reports it
		}
		q, err := Parse(cq)
		if err != nil {
			continue
		}
		used := q.Used(nodes)
		if cq.Status.Used != nil && equalLists(cq.Status.Used.Resources, used) {
			continue
		}
		if err := s.patchUsed(ctx, cq, used); err != nil {
			logger.Error(err, "Writing a CapacityQuota's status.used failed; tried again later", "capacityQuota", cq.Name)
		}
	}
}

func (s *Source) patchUsed(ctx context.Context, cq *CapacityQuota, used apiv1.ResourceList) error {
	// A merge patch merges maps: resources no longer limited are removed
	// with explicit nulls.
	resources := map[string]any{}
	if cq.Status.Used != nil {
		for res := range cq.Status.Used.Resources {
			resources[string(res)] = nil
		}
	}
	for res, v := range used {
		resources[string(res)] = v.String()
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"used": map[string]any{"resources": resources}}})
	if err != nil {
		return err
	}
	if _, err := s.dyn.Resource(Resource).Patch(ctx, cq.Name, types.MergePatchType, patch, metav1.PatchOptions{},
		"status"); err != nil {
		return fmt.Errorf("patching %s/status: %w", cq.Name, err)
	}
	return nil
}

func equalLists(a, b apiv1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, va := range a {
		vb, ok := b[k]
		if !ok || va.Cmp(vb) != 0 {
			return false
		}
	}
	return true
}
