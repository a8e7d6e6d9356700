package builder

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
	provreqclient "k8s.io/autoscaler/cluster-autoscaler/provreq/client"
	"k8s.io/autoscaler/cluster-autoscaler/provreq/processor"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
)

// NewProvReqProcessor wires the ProvisioningRequest processor: its typed
// client, informer (started by the caller), PodTemplate lister, status
// writer, the orchestrator's rollback and the ConfigMap that records the
// all-or-nothing attempts in flight for the next leader.
func NewProvReqProcessor(ctx context.Context, opts config.Options, restConfig *rest.Config, client kubernetes.Interface,
	factory informers.SharedInformerFactory, recorder record.EventRecorder, orchestrator *scaleup.Orchestrator,
	m *metrics.Metrics, wrap ProvReqWrappers) (*processor.Processor, cache.SharedIndexInformer, error) {
	c, err := provreqclient.NewForConfig(restConfig)
	if err != nil {
		return nil, nil, fmt.Errorf("building the ProvisioningRequest client: %w", err)
	}
	// Fail at start-up, with a clear message, when the CRD is not served:
	// the informer would otherwise retry forever and the loop never start.
	listCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := c.ProvisioningRequests("").List(listCtx, metav1.ListOptions{Limit: 1}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("--enable-provisioning-requests: the ProvisioningRequest CRD (provisioningrequests.autoscaling.x-k8s.io, v1) is not installed: %w", err)
		}
		return nil, nil, fmt.Errorf("--enable-provisioning-requests: listing ProvisioningRequests: %w", err)
	}
	informer := provreqclient.NewInformer(c, "", time.Hour)
	var status processor.StatusWriter = provreqclient.NewStatusWriter(c)
	if wrap.Status != nil {
		status = wrap.Status(status)
	}
	var records processor.RecordStore = provreqclient.NewConfigMapRecords(client, opts.Namespace, processor.RecordsConfigMap)
	if wrap.Records != nil {
		records = wrap.Records(records)
	}
	p := processor.New(processor.Options{
		BookingTime:             opts.ProvReqBookingTime,
		TemplateGracePeriod:     opts.ProvReqTemplateGracePeriod,
		ExpiryTime:              opts.ProvReqExpiryTime,
		RetentionTime:           opts.ProvReqRetentionTime,
		InitialBackoff:          opts.ProvReqInitialBackoff,
		MaxBackoff:              opts.ProvReqMaxBackoff,
		MaxBackoffEntries:       opts.ProvReqMaxBackoffCacheSize,
		ProcessorInstance:       opts.CheckCapacityProcessorInstance,
		CheckCapacityTimebox:    opts.CheckCapacityBatchTimebox,
		CheckCapacityMaxPerLoop: checkCapacityCap(opts),
		MaxNodeProvisionTime:    opts.NodeGroupDefaults.MaxNodeProvisionTime,
		MaxNodeStartupTime:      opts.NodeGroupDefaults.MaxNodeStartupTime,
		MaxPodsPerRequest:       opts.ProvReqMaxPods,
		MaxRunGrace:             opts.ProvReqMaxRunGrace,
	}, provreqclient.NewLister(informer.GetIndexer()), provreqclient.NewPodTemplates(factory.Core().V1().PodTemplates().Lister()),
		status, orchestrator.Rollback, processor.WithEventRecorder(recorder), processor.WithMetrics(m),
		processor.WithRecordStore(records))
	return p, informer, nil
}

// ProvReqWrappers wrap what the ProvisioningRequest processor writes
// through (`explain` records it instead); nil members wrap nothing.
type ProvReqWrappers struct {
	Status  func(processor.StatusWriter) processor.StatusWriter
	Records func(processor.RecordStore) processor.RecordStore
}

// checkCapacityCap is how many check-capacity requests one loop answers:
// --check-capacity-provisioning-request-max-batch-size with
// --check-capacity-batch-processing, as upstream; without it, no cap (every
// eligible request within the timebox, where upstream answers one per loop).
func checkCapacityCap(opts config.Options) int {
	if !opts.CheckCapacityBatchProcessing {
		return 0
	}
	return opts.CheckCapacityMaxBatchSize
}
