package scaledown

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/drain"
)

// Deletion reasons of scaled_down_nodes_total, upstream's.
const (
	ReasonEmpty          = "empty"
	ReasonUnderutilized  = "underutilized"
	ReasonUnready        = "unready"
	evictionRetryPeriod  = 5 * time.Second
	podGonePollPeriod    = time.Second
	extraTerminationWait = 10 * time.Second
)

// Metrics receives scale-down's numbers; metrics.Metrics implements it.
type Metrics interface {
	RegisterScaleDown(reason string, n int)
	RegisterEvictions(succeeded, failed int)
	ObserveNodeRemoval(deleted bool, sinceUnneeded time.Duration)
}

// Actuator removes nodes: empty ones in bulk, others after draining them
// through the Eviction API. Drains run in the background; Busy says which
// nodes are in flight.
type Actuator struct {
	opts     config.Options
	client   kubernetes.Interface
	taints   *Taints
	recorder record.EventRecorder
	metrics  Metrics
	clock    clock.Clock

	mu       sync.Mutex
	inFlight map[string]bool
	// lastDelete and lastFailure feed the cooldowns.
	lastDelete, lastFailure time.Time
	wg                      sync.WaitGroup
}

// NewActuator builds an actuator.
func NewActuator(opts config.Options, client kubernetes.Interface, taints *Taints, recorder record.EventRecorder,
	m Metrics, clk clock.Clock) *Actuator {
	return &Actuator{opts: opts, client: client, taints: taints, recorder: recorder, metrics: m, clock: clk,
		inFlight: map[string]bool{}}
}

// Busy reports the number of drains in flight.
func (a *Actuator) Busy() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.inFlight)
}

// Last returns when a node was last deleted and when a removal last failed.
func (a *Actuator) Last() (deleted, failed time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lastDelete, a.lastFailure
}

// Wait blocks until the drains in flight have ended (for shutdown and tests).
func (a *Actuator) Wait() { a.wg.Wait() }

// Remove starts removing the candidates: empty nodes at once, up to
// --max-scale-down-parallelism in all, of which at most
// --max-drain-parallelism drained nodes in flight. It returns how many it
// started.
func (a *Actuator) Remove(ctx context.Context, cs []*Candidate) int {
	a.mu.Lock()
	budget := a.opts.MaxScaleDownParallelism - len(a.inFlight)
	drains := a.opts.MaxDrainParallelism - len(a.inFlight)
	a.mu.Unlock()
	var empty, full []*Candidate
	for _, c := range cs {
		if c.Empty() {
			empty = append(empty, c)
		} else {
			full = append(full, c)
		}
	}
	started := 0
	if n := min(len(empty), budget); n > 0 {
		started += a.removeEmpty(ctx, empty[:n])
		budget -= n
	}
	for _, c := range full {
		if budget <= 0 || drains <= 0 {
			break
		}
		a.mu.Lock()
		a.inFlight[c.Node.Name] = true
		a.mu.Unlock()
		budget--
		drains--
		started++
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.drainAndDelete(context.WithoutCancel(ctx), c)
		}()
	}
	return started
}

// removeEmpty taints and deletes empty nodes, one DeleteNodes call per group.
func (a *Actuator) removeEmpty(ctx context.Context, cs []*Candidate) int {
	logger := klog.FromContext(ctx)
	now := a.clock.Now()
	byGroup := map[string][]*Candidate{}
	for _, c := range cs {
		if err := a.taints.MarkToBeDeleted(ctx, c.Node.Name, now); err != nil {
			logger.Error(err, "Scale-down of an empty node not started", "node", c.Node.Name)
			continue
		}
		a.event(c.Node, apiv1.EventTypeNormal, "ScaleDownEmpty", "Scale-down: removing empty node %s", c.Node.Name)
		byGroup[c.Group.Id()] = append(byGroup[c.Group.Id()], c)
	}
	ids := make([]string, 0, len(byGroup))
	for id := range byGroup {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	removed := 0
	for _, id := range ids {
		group := byGroup[id]
		if a.opts.DaemonSetEvictionForEmptyNodes {
			for _, c := range group {
				a.evictDaemonSetPods(ctx, c, a.opts.DaemonSetEvictionForEmptyNodes)
			}
		}
		nodes := make([]*apiv1.Node, len(group))
		names := make([]string, len(group))
		for i, c := range group {
			nodes[i], names[i] = c.Node, c.Node.Name
		}
		if err := group[0].Group.DeleteNodes(ctx, nodes); err != nil {
			logger.Error(err, "Deleting empty nodes failed", "nodeGroup", id, "nodes", names)
			for _, c := range group {
				a.failed(ctx, c, fmt.Sprintf("deleting the node failed: %v", err))
			}
			continue
		}
		for _, c := range group {
			logger.Info("Scaled down an empty node", "node", c.Node.Name, "nodeGroup", id, "reason", reasonOf(c))
			a.event(c.Node, apiv1.EventTypeNormal, "ScaleDownEmpty", "Scale-down: empty node %s removed", c.Node.Name)
			a.metrics.ObserveNodeRemoval(true, a.clock.Since(c.Since))
		}
		a.metrics.RegisterScaleDown(reasonOf(group[0]), len(group))
		removed += len(group)
	}
	if removed > 0 {
		a.mu.Lock()
		a.lastDelete = a.clock.Now()
		a.mu.Unlock()
	}
	return removed
}

func reasonOf(c *Candidate) string {
	switch {
	case c.Unready:
		return ReasonUnready
	case c.Empty():
		return ReasonEmpty
	}
	return ReasonUnderutilized
}

// drainAndDelete evicts the node's pods, honouring PDBs (a refused eviction
// is retried until --max-pod-eviction-time), waits for them to go, and
// deletes the node; any failure untaints the node and records it.
func (a *Actuator) drainAndDelete(ctx context.Context, c *Candidate) {
	logger := klog.FromContext(ctx).WithValues("node", c.Node.Name, "nodeGroup", c.Group.Id())
	defer func() {
		a.mu.Lock()
		delete(a.inFlight, c.Node.Name)
		a.mu.Unlock()
	}()
	if err := a.taints.MarkToBeDeleted(ctx, c.Node.Name, a.clock.Now()); err != nil {
		logger.Error(err, "Scale-down not started")
		return
	}
	names := make([]string, len(c.Move))
	for i, p := range c.Move {
		names[i] = p.Namespace + "/" + p.Name
	}
	logger.Info("Scaling down a node: draining it", "utilization", fmt.Sprintf("%.2f", c.Utilization), "pods", names)
	a.event(c.Node, apiv1.EventTypeNormal, "ScaleDown", "Scale-down: removing node %s, utilization: %.2f, pods to reschedule: %s",
		c.Node.Name, c.Utilization, strings.Join(names, ","))
	if err := a.evictAll(ctx, c.Move); err != nil {
		a.failed(ctx, c, fmt.Sprintf("draining failed: %v", err))
		return
	}
	if a.opts.DaemonSetEvictionForOccupiedNodes {
		a.evictDaemonSetPods(ctx, c, true)
	}
	if err := c.Group.DeleteNodes(ctx, []*apiv1.Node{c.Node}); err != nil {
		a.failed(ctx, c, fmt.Sprintf("deleting the node failed: %v", err))
		return
	}
	logger.Info("Scaled down a node after draining it", "reason", reasonOf(c), "pods", len(c.Move))
	a.event(c.Node, apiv1.EventTypeNormal, "ScaleDown", "Scale-down: node %s removed with drain", c.Node.Name)
	a.metrics.RegisterScaleDown(reasonOf(c), 1)
	a.metrics.ObserveNodeRemoval(true, a.clock.Since(c.Since))
	a.mu.Lock()
	a.lastDelete = a.clock.Now()
	a.mu.Unlock()
}

// evictAll evicts every pod and waits until they are gone.
func (a *Actuator) evictAll(ctx context.Context, pods []*apiv1.Pod) error {
	var wg sync.WaitGroup
	errs := make([]error, len(pods))
	for i, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = a.evict(ctx, p)
		}()
	}
	wg.Wait()
	ok, failed := 0, 0
	for _, err := range errs {
		if err != nil {
			failed++
		} else {
			ok++
		}
	}
	a.metrics.RegisterEvictions(ok, failed)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return a.waitGone(ctx, pods)
}

// evict asks the Eviction API to evict p, retrying while a PDB refuses it.
func (a *Actuator) evict(ctx context.Context, p *apiv1.Pod) error {
	grace := int64(a.opts.MaxGracefulTerminationSec)
	if p.Spec.TerminationGracePeriodSeconds != nil && *p.Spec.TerminationGracePeriodSeconds < grace {
		grace = *p.Spec.TerminationGracePeriodSeconds
	}
	deadline := a.clock.Now().Add(a.opts.MaxPodEvictionTime)
	for {
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name},
			DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: &grace}}
		err := a.client.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev)
		switch {
		case err == nil:
			a.event(p, apiv1.EventTypeNormal, "ScaleDown", "deleting pod for node scale down")
			return nil
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsTooManyRequests(err) && a.clock.Now().Before(deadline):
			a.clock.Sleep(evictionRetryPeriod)
		default:
			return fmt.Errorf("evicting pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
}

// waitGone waits until the pods left their node (grace period plus a margin).
func (a *Actuator) waitGone(ctx context.Context, pods []*apiv1.Pod) error {
	deadline := a.clock.Now().Add(time.Duration(a.opts.MaxGracefulTerminationSec)*time.Second + extraTerminationWait)
	for _, p := range pods {
		for {
			cur, err := a.client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || (err == nil && (cur.UID != p.UID || cur.Spec.NodeName != p.Spec.NodeName)) {
				break
			}
			if !a.clock.Now().Before(deadline) {
				return fmt.Errorf("pod %s/%s still on the node after %v", p.Namespace, p.Name,
					time.Duration(a.opts.MaxGracefulTerminationSec)*time.Second)
			}
			a.clock.Sleep(podGonePollPeriod)
		}
	}
	return nil
}

// evictDaemonSetPods evicts a node's DaemonSet pods, best effort, as the
// per-pod annotation and the flag say.
func (a *Actuator) evictDaemonSetPods(ctx context.Context, c *Candidate, flagDefault bool) {
	for _, p := range c.DaemonSet {
		if !drain.EvictDaemonSetPod(p, flagDefault) {
			continue
		}
		grace := int64(a.opts.MaxGracefulTerminationSec)
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name},
			DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: &grace}}
		if err := a.client.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev); err != nil && !apierrors.IsNotFound(err) {
			klog.FromContext(ctx).V(2).Info("Evicting a DaemonSet pod failed; the node goes anyway", "pod", klog.KObj(p), "err", err)
		}
	}
}

// failed undoes a removal that did not complete and records it.
func (a *Actuator) failed(ctx context.Context, c *Candidate, why string) {
	logger := klog.FromContext(ctx)
	logger.Info("Scale-down of a node failed", "node", c.Node.Name, "nodeGroup", c.Group.Id(), "why", why)
	if err := a.taints.UnmarkToBeDeleted(ctx, c.Node.Name); err != nil {
		logger.Error(err, "Untainting a node after a failed scale-down", "node", c.Node.Name)
	}
	a.event(c.Node, apiv1.EventTypeWarning, "ScaleDownFailed", "Scale-down of node %s failed: %s", c.Node.Name, why)
	a.metrics.ObserveNodeRemoval(false, a.clock.Since(c.Since))
	a.mu.Lock()
	a.lastFailure = a.clock.Now()
	a.mu.Unlock()
}

func (a *Actuator) event(obj interface{ GetName() string }, kind, reason, format string, args ...any) {
	if a.recorder == nil {
		return
	}
	switch o := obj.(type) {
	case *apiv1.Node:
		a.recorder.Eventf(o, kind, reason, format, args...)
	case *apiv1.Pod:
		a.recorder.Eventf(o, kind, reason, format, args...)
	}
}
