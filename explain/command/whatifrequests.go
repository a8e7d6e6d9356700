package command

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"k8s.io/autoscaler/cluster-autoscaler/builder"
	"k8s.io/autoscaler/cluster-autoscaler/explain/readonly"
	"k8s.io/autoscaler/cluster-autoscaler/explain/whatif"
	provreqv1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
	"k8s.io/autoscaler/cluster-autoscaler/provreq/processor"
)

// statusRecorder keeps the last status the simulated loop would write to
// each ProvisioningRequest and writes nothing (the write is answered with
// success, so that the loop goes on as it would); deletions are refused.
type statusRecorder struct {
	mu       sync.Mutex
	statuses map[string]provreqv1.ProvisioningRequestStatus
}

func newStatusRecorder() *statusRecorder {
	return &statusRecorder{statuses: map[string]provreqv1.ProvisioningRequestStatus{}}
}

func (r *statusRecorder) ApplyStatus(_ context.Context, namespace, name string, status provreqv1.ProvisioningRequestStatus) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.statuses[namespace+"/"+name] = *status.DeepCopy()
	return nil
}

func (r *statusRecorder) Delete(_ context.Context, namespace, name string, _ types.UID) error {
	return fmt.Errorf("deleting ProvisioningRequest %s/%s: %w", namespace, name, readonly.ErrWrite)
}

// status is the last status recorded for the request "namespace/name".
func (r *statusRecorder) status(key string) (provreqv1.ProvisioningRequestStatus, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.statuses[key]
	return s, ok
}

var _ processor.StatusWriter = (*statusRecorder)(nil)

// unsavedRecords reads the all-or-nothing attempts in flight from the
// store and saves nothing (the save is answered with success, so that the
// simulated scale-up goes on as it would).
type unsavedRecords struct{ processor.RecordStore }

func (unsavedRecords) Save(context.Context, map[string]string) error { return nil }

// addWhatIfRequests puts the manifests' ProvisioningRequests and
// PodTemplates into the informer caches the loop reads them from, as if
// they had been created (nothing is written to the API server).
func addWhatIfRequests(inf *builder.Informers, loop *builder.Loop, objects []whatif.Object) error {
	for _, o := range objects {
		switch {
		case o.Request != nil:
			if loop.ProvReqInformer == nil {
				return fmt.Errorf("-f: ProvisioningRequest %s/%s: the simulated loop has no ProvisioningRequests "+
					"(--enable-provisioning-requests is off, or the answer is from a --snapshot dump)", o.Namespace, o.Name)
			}
			if err := loop.ProvReqInformer.GetIndexer().Add(o.Request); err != nil {
				return fmt.Errorf("-f: ProvisioningRequest %s/%s: %w", o.Namespace, o.Name, err)
			}
		case o.Template != nil:
			if err := inf.Factory.Core().V1().PodTemplates().Informer().GetIndexer().Add(o.Template); err != nil {
				return fmt.Errorf("-f: PodTemplate %s/%s: %w", o.Namespace, o.Name, err)
			}
		}
	}
	return nil
}
