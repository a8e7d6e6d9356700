package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/capacitybuffer"
	v1 "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/apis/autoscaling.x-k8s.io/v1beta1"
)

// FieldManager is the server-side apply field manager of the controller's
// status fields.
const FieldManager = "cluster-autoscaler-capacity-buffer-controller"

// DefaultResync is how often every buffer is reconciled again when no event
// asked for it, so that changes no informer reports (the replicas of a kind
// without an informer, a LimitRange behind a dry-run) are seen.
const DefaultResync = time.Minute

// Buffers reads buffers from the informer's cache.
type Buffers interface {
	Get(namespace, name string) (*v1.CapacityBuffer, error)
	List() ([]*v1.CapacityBuffer, error)
	InNamespace(namespace string) ([]*v1.CapacityBuffer, error)
}

// StatusWriter applies the controller's part of a buffer's status.
type StatusWriter interface {
	ApplyStatus(ctx context.Context, namespace, name string, status v1.CapacityBufferStatus) error
}

// Templates reads PodTemplates (from a cache) and writes the ones the
// controller keeps for buffers.
type Templates interface {
	Get(namespace, name string) (*apiv1.PodTemplate, error)
	Create(ctx context.Context, t *apiv1.PodTemplate) (*apiv1.PodTemplate, error)
	Update(ctx context.Context, t *apiv1.PodTemplate) (*apiv1.PodTemplate, error)
}

// Target is what a scalableRef resolves to: its replica count and the
// template of its pods.
type Target struct {
	Replicas int32
	Template apiv1.PodTemplateSpec
	// Note, when set, says the template is not what it should have been
	// (a pod's controller could not be read); it goes into the
	// ReadyForProvisioning message and a PodOwnerNotRead event.
	Note string
}

// Scalables resolves scalableRefs. An error that is a *capacitybuffer.Problem
// is the buffer's fault and is reported on it; any other is retried.
type Scalables interface {
	Resolve(ctx context.Context, namespace string, ref v1.ScalableRef) (Target, error)
}

// PodResolver makes a pod of a template as the API server would admit it
// (a server dry-run).
type PodResolver interface {
	Resolve(ctx context.Context, namespace string, t *apiv1.PodTemplateSpec) (*apiv1.Pod, error)
}

// Option configures a Controller.
type Option func(*Controller)

// WithDryRun resolves every buffer's pod by server dry-run
// (--capacity-buffer-pod-dry-run-enabled).
func WithDryRun(r PodResolver) Option { return func(c *Controller) { c.dryRun = r } }

// WithEventRecorder records events on buffers when they become ready or
// fail to translate.
func WithEventRecorder(r record.EventRecorder) Option { return func(c *Controller) { c.recorder = r } }

// WithClock replaces the real clock.
func WithClock(clk clock.WithTicker) Option { return func(c *Controller) { c.clock = clk } }

// WithResync sets how often every buffer is reconciled without an event.
func WithResync(d time.Duration) Option { return func(c *Controller) { c.resync = d } }

// Controller reconciles CapacityBuffers; see the package documentation.
type Controller struct {
	buffers   Buffers
	templates Templates
	scalables Scalables
	status    StatusWriter
	dryRun    PodResolver
	quotas    Quotas
	recorder  record.EventRecorder
	clock     clock.WithTicker
	resync    time.Duration
	queue     workqueue.TypedRateLimitingInterface[string]

	mu sync.Mutex
	// reconciled is when each buffer (by UID) was last reconciled by this
	// process, for the reconciliation metric.
	reconciled map[types.UID]time.Time
}

// New builds a controller; register its handlers on the informers
// (BufferHandler, PodTemplateHandler, ScalableHandler) and Run it once their
// caches have synced.
func New(buffers Buffers, templates Templates, scalables Scalables, status StatusWriter, opts ...Option) *Controller {
	c := &Controller{buffers: buffers, templates: templates, scalables: scalables, status: status,
		clock: clock.RealClock{}, resync: DefaultResync, reconciled: map[types.UID]time.Time{}}
	for _, o := range opts {
		o(c)
	}
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "capacitybuffers", Clock: c.clock})
	return c
}

// Run reconciles buffers until ctx ends: those events ask for, and all of
// them every resync period. It returns once its reconciles have stopped.
func (c *Controller) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	logger.Info("CapacityBuffer controller started", "resync", c.resync, "dryRun", c.dryRun != nil)
	var worker sync.WaitGroup
	worker.Go(func() {
		for c.next(ctx) {
		}
	})
	wait.UntilWithContext(ctx, func(context.Context) { c.enqueueAll(ctx) }, c.resync)
	c.queue.ShutDown()
	worker.Wait()
	logger.Info("CapacityBuffer controller stopped")
}

func (c *Controller) next(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.Reconcile(ctx, key); err != nil {
		klog.FromContext(ctx).V(2).Info("Reconciling a CapacityBuffer failed; retrying", "buffer", key, "err", err)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

func (c *Controller) enqueueAll(ctx context.Context) {
	all, err := c.buffers.List()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Listing CapacityBuffers")
		return
	}
	for _, b := range all {
		c.enqueue(b)
	}
}

func (c *Controller) enqueue(b *v1.CapacityBuffer) {
	c.queue.Add(b.Namespace + "/" + b.Name)
}

// Reconcile translates one buffer, by "namespace/name" key, and writes its
// status when it changed. An error means a retry; a buffer that cannot be
// translated is not an error (its condition says why).
func (c *Controller) Reconcile(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // not a key of ours; nothing to retry
	}
	b, err := c.buffers.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !capacitybuffer.Handled(b) {
		return nil
	}
	tr, problem, err := c.translate(ctx, b)
	if err != nil {
		return err
	}
	want := c.desiredStatus(b, tr, problem)
	if !sameOwnedStatus(b.Status, want) {
		was := meta.FindStatusCondition(b.Status.Conditions, capacitybuffer.ConditionReadyForProvisioning).DeepCopy()
		wasReplicas := b.Status.Replicas
		if err := c.status.ApplyStatus(ctx, b.Namespace, b.Name, want); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("writing the status of CapacityBuffer %s: %w", key, err)
		}
		c.report(ctx, b, was, want, tr.note)
		if c.quotas != nil && !equalPtr(wasReplicas, want.Replicas) {
			// The buffers after it in the namespace share the quotas' room.
			c.enqueueWhere(b.Namespace, func(o *v1.CapacityBuffer) bool { return before(b, o) })
		}
	}
	c.mu.Lock()
	c.reconciled[b.UID] = c.clock.Now()
	c.mu.Unlock()
	return nil
}

// translation is a buffer translated: its template and chunk count.
type translation struct {
	template   string
	generation int64
	count      capacitybuffer.Count
	quota      quotaCut
	// note is the scalableRef's Target.Note.
	note string
}

// translate resolves the buffer's pod shape and counts its chunks. A
// problem is the buffer's fault; an error is transient.
func (c *Controller) translate(ctx context.Context, b *v1.CapacityBuffer) (translation, *capacitybuffer.Problem, error) {
	if p := capacitybuffer.Validate(b.Spec); p != nil {
		return translation{}, p, nil
	}
	var (
		shape            apiv1.PodTemplateSpec
		source           *apiv1.PodTemplate // the user's template, when used as is
		scalableReplicas int32
		note             string
	)
	if ref := b.Spec.PodTemplateRef; ref != nil {
		pt, err := c.templates.Get(b.Namespace, ref.Name)
		if apierrors.IsNotFound(err) {
			return translation{}, &capacitybuffer.Problem{Reason: capacitybuffer.ReasonPodTemplateNotFound,
				Message: fmt.Sprintf("PodTemplate %q not found in namespace %q", ref.Name, b.Namespace)}, nil
		}
		if err != nil {
			return translation{}, nil, err
		}
		shape, source = pt.Template, pt
	} else {
		target, err := c.scalables.Resolve(ctx, b.Namespace, *b.Spec.ScalableRef)
		if p, ok := errors.AsType[*capacitybuffer.Problem](err); ok {
			return translation{}, p, nil
		}
		if err != nil {
			return translation{}, nil, err
		}
		shape, scalableReplicas, note = target.Template, target.Replicas, target.Note
	}

	var pod *apiv1.Pod
	if c.dryRun != nil {
		var err error
		if pod, err = c.dryRun.Resolve(ctx, b.Namespace, &shape); err != nil {
			msg := fmt.Sprintf("the server dry-run of the buffer's pod failed (grant the autoscaler pods create, or set --capacity-buffer-pod-dry-run-enabled=false): %v", err)
			if note != "" {
				msg += "; " + note
			}
			return translation{}, &capacitybuffer.Problem{Reason: capacitybuffer.ReasonPodDryRunFailed, Message: msg}, nil
		}
		shape, source = capacitybuffer.TemplateFromPod(pod), nil
	} else {
		pod = capacitybuffer.PodFromTemplate(b.Namespace, &shape)
	}
	count, p := capacitybuffer.Replicas(b.Spec, capacitybuffer.Requests(pod), scalableReplicas)
	if p != nil {
		return translation{}, p, nil
	}
	quota, err := c.fitQuotas(b, pod, count.Replicas)
	if err != nil {
		return translation{}, nil, err
	}
	count.Replicas = quota.to
	if source != nil {
		return translation{template: source.Name, generation: source.Generation, count: count, quota: quota}, nil, nil
	}
	pt, p, err := c.keepTemplate(ctx, b, shape)
	if p != nil || err != nil {
		return translation{}, p, err
	}
	return translation{template: pt.Name, generation: pt.Generation, count: count, quota: quota, note: note}, nil, nil
}

// desiredStatus is the controller's part of the buffer's status: the
// translation, or the problem, as fields and conditions.
func (c *Controller) desiredStatus(b *v1.CapacityBuffer, tr translation, problem *capacitybuffer.Problem) v1.CapacityBufferStatus {
	strategy := capacitybuffer.Strategy(b.Spec)
	st := v1.CapacityBufferStatus{ProvisioningStrategy: &strategy}
	var conds []metav1.Condition
	for _, c := range b.Status.Conditions {
		if ownedCondition(c.Type) {
			conds = append(conds, c)
		}
	}
	now := metav1.NewTime(c.clock.Now())
	if problem != nil {
		meta.SetStatusCondition(&conds, metav1.Condition{Type: capacitybuffer.ConditionReadyForProvisioning,
			Status: metav1.ConditionFalse, Reason: problem.Reason, Message: problem.Message,
			ObservedGeneration: b.Generation, LastTransitionTime: now})
		meta.RemoveStatusCondition(&conds, capacitybuffer.ConditionLimitedByQuotas)
		st.Conditions = conds
		return st
	}
	replicas, generation := tr.count.Replicas, tr.generation
	st.PodTemplateRef = &v1.LocalObjectRef{Name: tr.template}
	st.Replicas, st.PodTemplateGeneration = &replicas, &generation
	msg := fmt.Sprintf("%d chunks of PodTemplate %s", replicas, tr.template)
	if len(tr.count.Notes) > 0 {
		msg += "; " + strings.Join(tr.count.Notes, "; ")
	}
	if tr.note != "" {
		msg += "; " + tr.note
	}
	meta.SetStatusCondition(&conds, metav1.Condition{Type: capacitybuffer.ConditionReadyForProvisioning,
		Status: metav1.ConditionTrue, Reason: capacitybuffer.ReasonAttributesSetSuccessfully, Message: msg,
		ObservedGeneration: b.Generation, LastTransitionTime: now})
	if q := tr.quota; q.applies {
		limited := metav1.ConditionFalse
		if q.to < q.from {
			limited = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&conds, metav1.Condition{Type: capacitybuffer.ConditionLimitedByQuotas, Status: limited,
			Reason: capacitybuffer.ReasonResourceQuotasAllocated, Message: q.message(),
			ObservedGeneration: b.Generation, LastTransitionTime: now})
	} else {
		meta.RemoveStatusCondition(&conds, capacitybuffer.ConditionLimitedByQuotas)
	}
	st.Conditions = conds
	return st
}

// ownedCondition reports whether the controller writes conditions of type t.
func ownedCondition(t string) bool {
	return t == capacitybuffer.ConditionReadyForProvisioning || t == capacitybuffer.ConditionLimitedByQuotas
}

// sameOwnedStatus reports whether the buffer's status already holds what
// the controller would write.
func sameOwnedStatus(have, want v1.CapacityBufferStatus) bool {
	if !equalPtr(have.ProvisioningStrategy, want.ProvisioningStrategy) || !equalPtr(have.Replicas, want.Replicas) ||
		!equalPtr(have.PodTemplateGeneration, want.PodTemplateGeneration) ||
		(have.PodTemplateRef == nil) != (want.PodTemplateRef == nil) ||
		(have.PodTemplateRef != nil && have.PodTemplateRef.Name != want.PodTemplateRef.Name) {
		return false
	}
	n := 0
	for _, h := range have.Conditions {
		if !ownedCondition(h.Type) {
			continue
		}
		n++
		if !capacitybuffer.SameCondition(&h, meta.FindStatusCondition(want.Conditions, h.Type)) {
			return false
		}
	}
	return n == len(want.Conditions)
}

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// report logs and records a status change of the buffer's readiness; was
// is its condition before the change.
func (c *Controller) report(ctx context.Context, b *v1.CapacityBuffer, was *metav1.Condition, st v1.CapacityBufferStatus, note string) {
	logger := klog.FromContext(ctx)
	now := meta.FindStatusCondition(st.Conditions, capacitybuffer.ConditionReadyForProvisioning)
	if note != "" && (was == nil || was.Message != now.Message) {
		logger.Info("CapacityBuffer template taken from a pod, not its controller", "buffer", klog.KObj(b), "why", note)
		if c.recorder != nil {
			c.recorder.Event(capacitybuffer.Reference(b), apiv1.EventTypeWarning, capacitybuffer.ReasonPodOwnerNotRead, note)
		}
	}
	changed := was == nil || was.Status != now.Status || was.Reason != now.Reason
	if now.Status == metav1.ConditionTrue {
		logger.V(2).Info("CapacityBuffer translated", "buffer", klog.KObj(b), "template", st.PodTemplateRef.Name,
			"replicas", *st.Replicas)
	} else {
		logger.Info("CapacityBuffer cannot be provisioned", "buffer", klog.KObj(b), "reason", now.Reason, "message", now.Message)
	}
	if !changed || c.recorder == nil {
		return
	}
	ref := capacitybuffer.Reference(b)
	if now.Status == metav1.ConditionTrue {
		c.recorder.Event(ref, apiv1.EventTypeNormal, capacitybuffer.ConditionReadyForProvisioning, now.Message)
		return
	}
	c.recorder.Event(ref, apiv1.EventTypeWarning, now.Reason, now.Message)
}

// forget drops what the controller remembers of a deleted buffer.
func (c *Controller) forget(uid types.UID) {
	c.mu.Lock()
	delete(c.reconciled, uid)
	c.mu.Unlock()
}
