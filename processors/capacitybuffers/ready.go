package capacitybuffers

import (
	"context"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/capacitybuffer"
	v1 "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/apis/autoscaling.x-k8s.io/v1beta1"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// ReadyReplicasFieldManager owns status.readyReplicas, as upstream's
// writer of that field is named. A field manager of its own keeps the
// field apart from the loop's Provisioning condition (whose applies, as
// cluster-autoscaler, would otherwise drop it) and from the controller's
// translation.
const ReadyReplicasFieldManager = "capacitybuffer-ready-replicas-controller"

// WithReadyReplicas writes, through w, status.readyReplicas of every buffer
// the loop looked at (--capacity-buffer-ready-replicas-enabled); without
// it the field is never written. The builder gives an AsyncWriter, so that
// the loop does not wait for these writes.
func WithReadyReplicas(w StatusWriter) Option { return func(i *Injector) { i.ready = w } }

// readyReplicasCounted reports whether the loop writes b's readyReplicas:
// as upstream, every buffer the controller translated for the
// active-capacity strategy, whether or not it got pods in this loop (a
// buffer not ready, empty or without its template has none ready).
func readyReplicasCounted(b *v1.CapacityBuffer) bool {
	s := b.Status.ProvisioningStrategy
	return s != nil && *s == capacitybuffer.StrategyActiveCapacity
}

// ReadyReplicas counts, per buffer UID, the injected pods that the scale-up
// left on one of nodes (the loop's existing nodes) in its simulation:
// podsOn tells what a node holds there. owner maps an injected pod's UID
// to its buffer. Pods on upcoming nodes, pods left pending and pods a
// scale-up was made for are not counted: their room does not exist yet.
func ReadyReplicas(owner map[types.UID]*v1.CapacityBuffer, nodes []*apiv1.Node,
	podsOn func(node string) []*apiv1.Pod) map[types.UID]int32 {
	out := map[types.UID]int32{}
	if len(owner) == 0 || podsOn == nil {
		return out
	}
	for _, n := range nodes {
		for _, p := range podsOn(n.Name) {
			if b, ok := owner[p.UID]; ok {
				out[b.UID]++
			}
		}
	}
	return out
}

// writeReadyReplicas applies the readyReplicas of the buffers the loop
// counted whose status says otherwise.
func (in *Injector) writeReadyReplicas(ctx context.Context, loop *processors.Loop, status processors.ScaleUpStatus) {
	if in.ready == nil || len(in.loop.counted) == 0 {
		return
	}
	var podsOn func(string) []*apiv1.Pod
	if status.Session != nil {
		podsOn = status.Session.PodsOn
	}
	ready := ReadyReplicas(in.loop.owner, loop.Nodes, podsOn)
	logger := klog.FromContext(ctx)
	for _, b := range in.loop.counted {
		n := ready[b.UID]
		if cur := b.Status.ReadyReplicas; cur != nil && *cur == n {
			continue
		}
		err := in.ready.ApplyStatus(ctx, b.Namespace, b.Name, v1.CapacityBufferStatus{ReadyReplicas: &n})
		if err != nil && !apierrors.IsNotFound(err) {
			logger.Error(err, "Writing the readyReplicas of a CapacityBuffer", "buffer", klog.KObj(b))
			continue
		}
		logger.V(4).Info("CapacityBuffer readyReplicas changed", "buffer", klog.KObj(b), "readyReplicas", n)
	}
}
