package builder

import (
	"context"
	"fmt"
	"strings"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/provreq/processor"
)

// NewEventBroadcaster builds the events' broadcaster as upstream does.
// Unless --record-duplicated-events, client-go's spam filter lets through
// one event per reason and object (any type, any message) and refills once
// per five minutes, remembering 8192 keys; events on the status ConfigMap
// are told apart by their message only, so that each distinct cluster-level
// event is recorded, and those on the attempt records' ConfigMap by reason
// and message (one per record dropped or instance a rollback kept). (Upstream recognises the status ConfigMap only under its
// default name in kube-system; here it is --status-config-map-name in
// --namespace.) With --record-duplicated-events client-go's defaults apply.
//
// The broadcaster lives until its owner calls Shutdown, not until ctx ends: a
// SIGTERM cancels ctx, and the events of the shutdown that follows (the
// leader election's "stopped leading") would otherwise fail with "broadcaster
// already stopped" error lines.
func NewEventBroadcaster(ctx context.Context, opts config.Options) record.EventBroadcaster {
	ctx = context.WithoutCancel(ctx)
	if opts.RecordDuplicatedEvents {
		return record.NewBroadcaster(record.WithContext(ctx))
	}
	return record.NewBroadcaster(record.WithContext(ctx), record.WithCorrelatorOptions(record.CorrelatorOptions{
		QPS: 1. / 300., BurstSize: 1, LRUCacheSize: 8192,
		SpamKeyFunc: spamKey(opts.Namespace, opts.StatusConfigMapName)}))
}

// spamKey is the spam filter's key of an event: see NewEventBroadcaster.
func spamKey(statusNamespace, statusName string) record.EventSpamKeyFunc {
	return func(ev *apiv1.Event) string {
		o := ev.InvolvedObject
		if o.Kind == "ConfigMap" && o.Namespace == statusNamespace && o.Name == statusName {
			return ev.Message
		}
		if o.Kind == "ConfigMap" && o.Namespace == statusNamespace && o.Name == processor.RecordsConfigMap {
			return o.Name + ev.Reason + ev.Message // each record dropped or rollback kept is told
		}
		return strings.Join([]string{ev.Reason, ev.Source.Component, ev.Source.Host, o.Kind, o.Namespace, o.Name,
			string(o.UID), o.APIVersion}, "")
	}
}

// NewEventRecorder starts the loop's events: sent to the API server through a
// client of their own (restConfig's; client's offline), so that a burst of
// them does not hold up status writes and cloud actions behind one rate
// limiter; readOnly (`explain`), logged at --v=4 and not sent. The returned
// shutdown flushes and stops them.
func NewEventRecorder(ctx context.Context, opts config.Options, restConfig *rest.Config, client kubernetes.Interface,
	readOnly bool) (recorder record.EventRecorder, shutdown func(), err error) {
	eventsClient := client
	if restConfig != nil {
		c, err := kubernetes.NewForConfig(rest.CopyConfig(restConfig))
		if err != nil {
			return nil, nil, fmt.Errorf("building the events client: %w", err)
		}
		eventsClient = c
	}
	broadcaster := NewEventBroadcaster(ctx, opts)
	if readOnly {
		broadcaster.StartStructuredLogging(4)
	} else {
		broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: eventsClient.CoreV1().Events("")})
	}
	return broadcaster.NewRecorder(clientgoscheme.Scheme, apiv1.EventSource{Component: "cluster-autoscaler"}),
		broadcaster.Shutdown, nil
}
