package capacitybuffers

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/capacitybuffer"
	v1 "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/apis/autoscaling.x-k8s.io/v1beta1"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// Event reasons on buffers, as upstream's.
const (
	EventTriggeredScaleUp  = processors.EventTriggeredScaleUp
	EventNotTriggerScaleUp = processors.EventNotTriggerScaleUp
)

// Buffers lists the buffers (the informer's cache).
type Buffers interface {
	List() ([]*v1.CapacityBuffer, error)
}

// Templates reads PodTemplates (the informer's cache).
type Templates interface {
	Get(namespace, name string) (*apiv1.PodTemplate, error)
}

// StatusWriter applies the loop's part of a buffer's status: its
// Provisioning condition.
type StatusWriter interface {
	ApplyStatus(ctx context.Context, namespace, name string, status v1.CapacityBufferStatus) error
}

// Injector injects the pods of ready buffers into the loop's pending pods
// and reports on the buffers; see the package documentation. One value sits
// in the pod lists and the scale-up status processors, and one loop uses it
// at a time.
type Injector struct {
	buffers   Buffers
	templates Templates
	status    StatusWriter
	recorder  record.EventRecorder
	limit     int
	// ready writes status.readyReplicas (WithReadyReplicas); nil: never.
	ready StatusWriter
	loop  *injection
}

// injection is one loop's state, from the pod list to the status.
type injection struct {
	// owner is the buffer of each injected pod.
	owner map[types.UID]*v1.CapacityBuffer
	// conditions are the Provisioning conditions the buffers should have.
	conditions []provisioning
	// counted are the buffers whose readyReplicas the loop writes.
	counted []*v1.CapacityBuffer
}

type provisioning struct {
	buffer    *v1.CapacityBuffer
	condition metav1.Condition
}

// Option configures an Injector.
type Option func(*Injector)

// WithEventRecorder records TriggeredScaleUp and NotTriggerScaleUp on the
// buffers.
func WithEventRecorder(r record.EventRecorder) Option { return func(i *Injector) { i.recorder = r } }

// WithInjectionLimit stops adding buffer pods once the pending list holds
// limit pods (--pod-injection-limit); zero or less is no limit.
func WithInjectionLimit(limit int) Option { return func(i *Injector) { i.limit = limit } }

// New builds an Injector.
func New(buffers Buffers, templates Templates, status StatusWriter, opts ...Option) *Injector {
	i := &Injector{buffers: buffers, templates: templates, status: status}
	for _, o := range opts {
		o(i)
	}
	return i
}

// ProcessPods implements processors.PodListProcessor: the pods of every
// ready buffer of the active-capacity strategy are appended after pods.
func (in *Injector) ProcessPods(ctx context.Context, loop *processors.Loop, pods []*apiv1.Pod) []*apiv1.Pod {
	logger := klog.FromContext(ctx)
	in.loop = &injection{owner: map[types.UID]*v1.CapacityBuffer{}}
	buffers, err := in.buffers.List()
	if err != nil {
		logger.Error(err, "Listing CapacityBuffers; none injected in this loop")
		return pods
	}
	slices.SortFunc(buffers, func(a, b *v1.CapacityBuffer) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Namespace, b.Namespace),
			cmp.Compare(a.Name, b.Name))
	})
	out := pods[:len(pods):len(pods)]
	room := -1 // no limit
	if in.limit > 0 {
		room = max(in.limit-len(pods), 0)
	}
	injected, served := 0, 0
	for _, b := range buffers {
		if !capacitybuffer.Handled(b) {
			continue
		}
		if in.ready != nil && readyReplicasCounted(b) {
			in.loop.counted = append(in.loop.counted, b)
		}
		cond, fake := in.provision(b, room)
		if cond == nil {
			continue
		}
		in.loop.conditions = append(in.loop.conditions, provisioning{buffer: b, condition: *cond})
		for _, p := range fake {
			in.loop.owner[p.UID] = b
		}
		out = append(out, fake...)
		if room >= 0 {
			room -= len(fake)
		}
		if len(fake) > 0 {
			injected += len(fake)
			served++
			logger.V(4).Info("CapacityBuffer pods injected", "buffer", klog.KObj(b), "pods", len(fake))
		}
	}
	if injected > 0 {
		logger.V(2).Info("CapacityBuffer pods injected after the pending pods", "pods", injected, "buffers", served)
	}
	return out
}

// provision decides one buffer's pods and Provisioning condition; a nil
// condition leaves the buffer alone (the controller has not looked at it).
func (in *Injector) provision(b *v1.CapacityBuffer, room int) (*metav1.Condition, []*apiv1.Pod) {
	cond := func(status metav1.ConditionStatus, reason, format string, args ...any) *metav1.Condition {
		return &metav1.Condition{Type: capacitybuffer.ConditionProvisioning, Status: status, Reason: reason,
			Message: fmt.Sprintf(format, args...), ObservedGeneration: b.Generation}
	}
	if !capacitybuffer.Ready(b) {
		ready := meta.FindStatusCondition(b.Status.Conditions, capacitybuffer.ConditionReadyForProvisioning)
		if ready == nil || ready.Status == metav1.ConditionTrue {
			return nil, nil
		}
		return cond(metav1.ConditionFalse, capacitybuffer.ReasonNotReadyForProvisioning,
			"the buffer is not ready for provisioning (%s)", ready.Reason), nil
	}
	want := int(*b.Status.Replicas)
	if want <= 0 {
		return cond(metav1.ConditionFalse, capacitybuffer.ReasonBufferIsEmpty, "the buffer has zero replicas"), nil
	}
	pt, err := in.templates.Get(b.Namespace, b.Status.PodTemplateRef.Name)
	if err != nil {
		why := err.Error()
		if apierrors.IsNotFound(err) {
			why = fmt.Sprintf("PodTemplate %q not found", b.Status.PodTemplateRef.Name)
		}
		return cond(metav1.ConditionFalse, capacitybuffer.ReasonFailedToGetPodTemplate, "%s", why), nil
	}
	n := want
	if room >= 0 {
		n = min(n, room)
	}
	fake := capacitybuffer.FakePods(b, &pt.Template, n)
	if n < want {
		return cond(metav1.ConditionTrue, capacitybuffer.ReasonFakePodsInjected,
			"%d of %d pods injected: --pod-injection-limit reached", n, want), fake
	}
	return cond(metav1.ConditionTrue, capacitybuffer.ReasonFakePodsInjected, "%d pods injected", n), fake
}

// ScaleUpDone implements processors.ScaleUpStatusProcessor: events on the
// buffers whose pods a scale-up served or could not serve, the
// Provisioning conditions that changed and, WithReadyReplicas, the
// readyReplicas that changed.
func (in *Injector) ScaleUpDone(ctx context.Context, loop *processors.Loop, status processors.ScaleUpStatus) {
	if in.loop == nil {
		return
	}
	defer func() { in.loop = nil }()
	in.events(status)
	logger := klog.FromContext(ctx)
	for _, p := range in.loop.conditions {
		cur := meta.FindStatusCondition(p.buffer.Status.Conditions, capacitybuffer.ConditionProvisioning)
		want := p.condition
		if capacitybuffer.SameCondition(cur, &want) {
			continue
		}
		want.LastTransitionTime = metav1.NewTime(loop.Now)
		if cur != nil && cur.Status == want.Status {
			want.LastTransitionTime = cur.LastTransitionTime
		}
		err := in.status.ApplyStatus(ctx, p.buffer.Namespace, p.buffer.Name, v1.CapacityBufferStatus{Conditions: []metav1.Condition{want}})
		if err != nil && !apierrors.IsNotFound(err) {
			logger.Error(err, "Writing the Provisioning condition of a CapacityBuffer", "buffer", klog.KObj(p.buffer))
		}
	}
	in.writeReadyReplicas(ctx, loop, status)
}

// events records, per buffer, TriggeredScaleUp when a scale-up served its
// pods, and NotTriggerScaleUp when no group was scaled up in this loop and
// its pods were left.
func (in *Injector) events(status processors.ScaleUpStatus) {
	if in.recorder == nil {
		return
	}
	res := status.Result
	type tally struct {
		n       int
		reasons []string
	}
	counts := map[*v1.CapacityBuffer]*tally{}
	count := func(p *apiv1.Pod, reason string) {
		b, ok := in.loop.owner[p.UID]
		if !ok {
			return
		}
		t := counts[b]
		if t == nil {
			t = &tally{}
			counts[b] = t
		}
		t.n++
		if reason != "" && !slices.Contains(t.reasons, reason) {
			t.reasons = append(t.reasons, reason)
		}
	}
	for i, inc := range res.Increases {
		if i > 0 && res.Increases[i-1].Decision == inc.Decision {
			continue
		}
		var parts []string
		for _, other := range res.Increases[i:] {
			if other.Decision == inc.Decision {
				parts = append(parts, fmt.Sprintf("{%s %d->%d (max: %d)}", other.NodeGroup, other.From, other.To, other.Max))
			}
		}
		clear(counts)
		for _, p := range inc.Pods {
			count(p, "")
		}
		for b, t := range counts {
			in.recorder.Eventf(capacitybuffer.Reference(b), apiv1.EventTypeNormal, EventTriggeredScaleUp,
				"capacity buffer %d fake pods triggered scale-up: [%s]", t.n, strings.Join(parts, " "))
		}
	}
	if len(res.Increases) > 0 {
		return
	}
	clear(counts)
	for p, reason := range res.Remaining {
		count(p, strings.TrimSpace(reason))
	}
	for b, t := range counts {
		slices.Sort(t.reasons)
		in.recorder.Eventf(capacitybuffer.Reference(b), apiv1.EventTypeNormal, EventNotTriggerScaleUp,
			"capacity buffer %d fake pods didn't trigger scale-up: %s", t.n, strings.Join(t.reasons, "; "))
	}
}
