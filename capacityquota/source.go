package capacityquota

import (
	"context"
	"fmt"
	"sort"
	"sync"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// Source lists the cluster's CapacityQuotas from an informer.
type Source struct {
	informer cache.SharedIndexInformer
	recorder record.EventRecorder
	dyn      dynamic.Interface

	mu sync.Mutex
	// reported remembers, per object UID, the resourceVersion whose
	// problem was already logged and recorded, so a bad object costs one
	// event per change, not one per loop.
	reported map[string]string
}

// NewSource builds a Source; start it with Run and wait for HasSynced.
func NewSource(dyn dynamic.Interface, recorder record.EventRecorder) *Source {
	informer := dynamicinformer.NewFilteredDynamicInformer(dyn, Resource, metav1.NamespaceAll, 0,
		cache.Indexers{}, nil).Informer()
	return &Source{informer: informer, recorder: recorder, dyn: dyn, reported: map[string]string{}}
}

// Check fails when the API server does not serve CapacityQuotas (the CRD is
// not installed), so that start-up can say so instead of an informer
// retrying forever.
func Check(ctx context.Context, dyn dynamic.Interface) error {
	if _, err := dyn.Resource(Resource).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("the CapacityQuota CRD (capacityquotas.autoscaling.x-k8s.io, %s) is not installed: %w",
				GroupVersion.Version, err)
		}
		return fmt.Errorf("listing CapacityQuotas: %w", err)
	}
	return nil
}

// Run runs the informer until ctx ends.
func (s *Source) Run(ctx context.Context) { s.informer.RunWithContext(ctx) }

// HasSynced reports whether the informer has listed once.
func (s *Source) HasSynced() bool { return s.informer.HasSynced() }

// Quotas returns the valid quotas, sorted by name. An invalid one is left
// out, with a log line and a Warning event (InvalidCapacityQuota) once per
// version of the object.
func (s *Source) Quotas(ctx context.Context) []Quota {
	objs := s.informer.GetStore().List()
	out := make([]Quota, 0, len(objs))
	for _, obj := range objs {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		cq := &CapacityQuota{}
		err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cq)
		var q Quota
		if err == nil {
			q, err = Parse(cq)
		} else {
			cq.Name, cq.UID, cq.ResourceVersion = u.GetName(), u.GetUID(), u.GetResourceVersion()
			err = fmt.Errorf("decoding: %w", err)
		}
		if err != nil {
			s.report(ctx, cq, err)
			continue
		}
		out = append(out, q)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (s *Source) report(ctx context.Context, cq *CapacityQuota, err error) {
	s.mu.Lock()
	seen := s.reported[string(cq.UID)] == cq.ResourceVersion
	s.reported[string(cq.UID)] = cq.ResourceVersion
	s.mu.Unlock()
	if seen {
		return
	}
	klog.FromContext(ctx).Error(err, "Ignoring an invalid CapacityQuota: scale-up is not limited by it", "capacityQuota", cq.Name)
	if s.recorder != nil {
		ref := &apiv1.ObjectReference{APIVersion: GroupVersion.String(), Kind: "CapacityQuota", Name: cq.Name,
			UID: cq.UID, ResourceVersion: cq.ResourceVersion}
		s.recorder.Eventf(ref, apiv1.EventTypeWarning, "InvalidCapacityQuota",
			"ignored by the cluster autoscaler: %v", err)
	}
}
