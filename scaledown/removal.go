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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/drain"
)

// run carries one job through: taint, delay, drain, delay-deletion
// annotations, the last check for pods bound meanwhile, deletion. It
// returns the nodes it deleted and whether a removal failed. When ctx ends
// it stops where it is and leaves the taints it wrote: the next run's
// start-up clean-up removes them.
func (a *Actuator) run(ctx context.Context, j *job) (deleted []*Candidate, failed bool) {
	logger := klog.FromContext(ctx).WithValues("nodeGroup", j.cs[0].Group.Id())
	ctx = klog.NewContext(ctx, logger)
	started := map[string]time.Time{}
	live, failed := a.taintAll(ctx, j, started)
	if len(live) == 0 {
		return nil, failed
	}
	a.phase(live, PhaseDraining)
	if !a.sleep(ctx, a.deleteDelay(ctx, started)) {
		return a.interrupted(ctx, live)
	}
	live, drainFailed := a.drainAll(ctx, j, live)
	failed = failed || drainFailed
	if ctx.Err() != nil {
		return a.interrupted(ctx, live)
	}
	if len(live) == 0 {
		return nil, failed
	}
	if !a.waitDelayDeletion(ctx, live) {
		return a.interrupted(ctx, live)
	}
	live = a.recheck(ctx, j, live)
	if ctx.Err() != nil {
		return a.interrupted(ctx, live)
	}
	if len(live) == 0 {
		return nil, failed
	}
	if a.deleteNodes(ctx, live) {
		return live, failed
	}
	return nil, true
}

// taintAll writes the ToBeDeleted taint on the job's nodes; a node that
// cannot be tainted is left out (for an atomic job, the whole job is).
// started gets when each write began.
func (a *Actuator) taintAll(ctx context.Context, j *job, started map[string]time.Time) (live []*Candidate, failed bool) {
	logger := klog.FromContext(ctx)
	for _, c := range j.cs {
		started[c.Node.Name] = a.clock.Now()
		if err := a.taints.MarkToBeDeleted(ctx, c.Node.Name, a.clock.Now()); err != nil {
			delete(started, c.Node.Name)
			if ctx.Err() != nil {
				a.interrupted(ctx, live)
				return nil, false
			}
			if errors.Is(err, ErrTakenByDisruption) && !j.atomic {
				logger.Info("Scale-down of a node not started: the disruption engine took it", "node", c.Node.Name)
				a.ended(c, OutcomeCancelled)
				continue
			}
			logger.Error(err, "Scale-down of a node not started", "node", c.Node.Name)
			a.event(c.Node, apiv1.EventTypeWarning, "ScaleDownFailed", "failed to mark the node as toBeDeleted/unschedulable: %v", err)
			if j.atomic {
				a.abort(ctx, live, fmt.Sprintf("node %s of the zeroOrMaxNodeScaling group could not be tainted", c.Node.Name))
				return nil, true
			}
			failed = true
			continue
		}
		live = append(live, c)
		// Upstream's Node event, empty or not; the cluster-level events
		// with the node's name, utilization and pods go on the status
		// ConfigMap (core.Reporting).
		a.event(c.Node, apiv1.EventTypeNormal, "ScaleDown", "marked the node as toBeDeleted/unschedulable")
		if c.Empty() {
			logger.Info("Scaling down an empty node", "node", c.Node.Name, "atomic", j.atomic)
			continue
		}
		logger.Info("Scaling down a node: draining it", "node", c.Node.Name, "atomic", j.atomic,
			"utilization", fmt.Sprintf("%.2f", c.Utilization), "pods", podNames(c.Move))
	}
	return live, failed
}

// drainAll evicts the pods of the occupied nodes, in parallel, and waits for
// them to go. A node whose drain failed is untainted and left out (for an
// atomic job, every node is).
func (a *Actuator) drainAll(ctx context.Context, j *job, live []*Candidate) ([]*Candidate, bool) {
	errs := make([]error, len(live))
	var wg sync.WaitGroup
	for i, c := range live {
		if c.Empty() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = a.evictAll(ctx, c.Move)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return live, false
	}
	var kept []*Candidate
	failed := false
	for i, c := range live {
		if errs[i] == nil {
			kept = append(kept, c)
			continue
		}
		failed = true
		a.failed(ctx, c, fmt.Sprintf("draining failed: %v", errs[i]))
		if j.atomic {
			a.abort(ctx, without(live, c), fmt.Sprintf("draining node %s of the zeroOrMaxNodeScaling group failed", c.Node.Name))
			return nil, true
		}
	}
	return kept, failed
}

// waitDelayDeletion waits until no node of live carries a
// delay-deletion.cluster-autoscaler.kubernetes.io/ annotation, as the API
// server has them, or --node-deletion-delay-timeout passed (then the
// deletion goes on). It returns false when ctx ended.
func (a *Actuator) waitDelayDeletion(ctx context.Context, live []*Candidate) bool {
	logger := klog.FromContext(ctx)
	deadline := a.clock.Now().Add(a.opts.NodeDeletionDelayTimeout)
	for {
		var held []string
		for _, c := range live {
			n, err := a.client.CoreV1().Nodes().Get(ctx, c.Node.Name, metav1.GetOptions{})
			if err != nil {
				if ctx.Err() != nil {
					return false
				}
				if !apierrors.IsNotFound(err) {
					logger.V(2).Info("Reading a node for its delay-deletion annotations failed", "node", c.Node.Name, "err", err)
				}
				continue
			}
			if keys := delayDeletionKeys(n); len(keys) > 0 {
				held = append(held, c.Node.Name+" "+strings.Join(keys, ","))
			}
		}
		if len(held) == 0 {
			return true
		}
		if !a.clock.Now().Before(deadline) {
			logger.Info("Delay-deletion annotations still present after the timeout; deleting anyway",
				"held", held, "timeout", a.opts.NodeDeletionDelayTimeout)
			return true
		}
		logger.V(2).Info("Deletion held by delay-deletion annotations", "held", held)
		if !a.sleep(ctx, min(a.annotationPoll, deadline.Sub(a.clock.Now()))) {
			return false
		}
	}
}

func delayDeletionKeys(n *apiv1.Node) []string {
	var keys []string
	for k := range n.Annotations {
		if strings.HasPrefix(k, DelayDeletionAnnotationPrefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// recheck lists, from the API server rather than the informer, the pods on
// each node: a pod bound since the plan (one that tolerates the taint, or
// was bound before the taint was seen) cancels that node's removal and
// untaints it (for an atomic job, all the job's). A node whose pods cannot
// be listed is not deleted either.
func (a *Actuator) recheck(ctx context.Context, j *job, live []*Candidate) []*Candidate {
	logger := klog.FromContext(ctx)
	var kept []*Candidate
	for _, c := range live {
		pods, err := a.podsOn(ctx, c.Node.Name)
		if ctx.Err() != nil {
			return live
		}
		why := ""
		switch {
		case err != nil:
			why = fmt.Sprintf("listing its pods failed: %v", err)
		case len(pods) > 0:
			why = fmt.Sprintf("pods were bound to it meanwhile: %s", strings.Join(pods, ","))
		}
		if why == "" {
			kept = append(kept, c)
			continue
		}
		logger.Info("Scale-down of a node cancelled", "node", c.Node.Name, "why", why)
		a.cancel(ctx, c, why)
		if j.atomic {
			a.abort(ctx, without(live, c), fmt.Sprintf("the removal of node %s of the zeroOrMaxNodeScaling group was cancelled", c.Node.Name))
			return nil
		}
	}
	return kept
}

// podsOn names the pods on node, per the API server, that would keep it:
// not DaemonSet or mirror pods, not finished, not being deleted.
func (a *Actuator) podsOn(ctx context.Context, node string) ([]string, error) {
	list, err := a.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return nil, fmt.Errorf("listing the pods of node %s: %w", node, err)
	}
	var out []string
	for i := range list.Items {
		p := &list.Items[i]
		if p.Spec.NodeName != node || p.DeletionTimestamp != nil || p.Status.Phase == apiv1.PodSucceeded ||
			p.Status.Phase == apiv1.PodFailed || drain.IsDaemonSetPod(p) || drain.IsMirrorPod(p) {
			continue
		}
		out = append(out, p.Namespace+"/"+p.Name)
	}
	sort.Strings(out)
	return out, nil
}

// deleteNodes evicts DaemonSet pods as configured and deletes the nodes in
// one DeleteNodes call; on failure the nodes are untainted.
func (a *Actuator) deleteNodes(ctx context.Context, live []*Candidate) bool {
	logger := klog.FromContext(ctx)
	a.phase(live, PhaseDeleting)
	nodes := make([]*apiv1.Node, len(live))
	names := make([]string, len(live))
	for i, c := range live {
		flag := a.opts.DaemonSetEvictionForOccupiedNodes
		if c.Empty() {
			flag = a.opts.DaemonSetEvictionForEmptyNodes
		}
		a.evictDaemonSetPods(ctx, c, flag)
		nodes[i], names[i] = c.Node, c.Node.Name
	}
	start := a.clock.Now()
	err := a.deleteBatched(ctx, live[0].Group, nodes)
	a.metrics.UpdateDuration(metrics.FunctionScaleDownNodeDeletion, a.clock.Since(start))
	if err != nil {
		logger.Error(err, "Deleting nodes failed", "nodes", names)
		for _, c := range live {
			a.failed(ctx, c, fmt.Sprintf("deleting the node failed: %v", err))
		}
		return false
	}
	for _, c := range live {
		if c.Empty() {
			logger.Info("Scaled down an empty node", "node", c.Node.Name, "reason", reasonOf(c))
		} else {
			logger.Info("Scaled down a node after draining it", "node", c.Node.Name, "reason", reasonOf(c), "pods", len(c.Move))
		}
		a.event(c.Node, apiv1.EventTypeNormal, "ScaleDown", "nodes removed by cluster autoscaler")
		a.ended(c, OutcomeDeleted)
		a.metrics.ObserveNodeRemoval(true, a.clock.Since(c.Since))
		a.metrics.ScaledDown(ctx, c.Node, reasonOf(c))
	}
	return true
}

// deletionBatch gathers the nodes of one group deleted together
// (--node-deletion-batcher-interval).
type deletionBatch struct {
	nodes []*apiv1.Node
	done  chan struct{}
	err   error
}

// deleteBatched deletes nodes of group: at once without
// --node-deletion-batcher-interval; with it, in one DeleteNodes call with
// every node of the group whose deletion came within the interval after the
// first one, and returns that call's outcome.
func (a *Actuator) deleteBatched(ctx context.Context, group cloudprovider.NodeGroup, nodes []*apiv1.Node) error {
	interval := a.opts.NodeDeletionBatcherInterval
	if interval <= 0 {
		return group.DeleteNodes(ctx, nodes)
	}
	a.batchMu.Lock()
	b := a.batches[group.Id()]
	if b == nil {
		b = &deletionBatch{done: make(chan struct{})}
		a.batches[group.Id()] = b
		go func() {
			if a.sleep(ctx, interval) {
				a.batchMu.Lock()
				delete(a.batches, group.Id())
				all := b.nodes
				a.batchMu.Unlock()
				klog.FromContext(ctx).V(2).Info("Deleting a batch of nodes", "nodeGroup", group.Id(), "nodes", len(all))
				b.err = group.DeleteNodes(ctx, all)
			} else {
				a.batchMu.Lock()
				delete(a.batches, group.Id())
				a.batchMu.Unlock()
				b.err = fmt.Errorf("waiting for the deletion batch: %w", context.Cause(ctx))
			}
			close(b.done)
		}()
	}
	b.nodes = append(b.nodes, nodes...)
	a.batchMu.Unlock()
	<-b.done
	return b.err
}

// cancel undoes a removal called off because the node is needed after all.
func (a *Actuator) cancel(ctx context.Context, c *Candidate, why string) {
	if err := a.taints.UnmarkToBeDeleted(ctx, c.Node.Name); err != nil {
		klog.FromContext(ctx).Error(err, "Untainting a node after a cancelled scale-down", "node", c.Node.Name)
	}
	a.event(c.Node, apiv1.EventTypeNormal, "ScaleDownCancelled", "Scale-down of node %s cancelled: %s", c.Node.Name, why)
	a.ended(c, OutcomeCancelled)
	a.metrics.ObserveNodeRemoval(false, a.clock.Since(c.Since))
}

// abort calls off the rest of an atomic job.
func (a *Actuator) abort(ctx context.Context, rest []*Candidate, why string) {
	for _, c := range rest {
		a.cancel(ctx, c, why)
	}
}

// interrupted logs the removals ctx's end cut short; their taints stay.
func (a *Actuator) interrupted(ctx context.Context, live []*Candidate) ([]*Candidate, bool) {
	for _, c := range live {
		klog.FromContext(ctx).Info("Scale-down interrupted (lease lost or shutting down); the deletion taint stays for the next run's start-up clean-up",
			"node", c.Node.Name)
	}
	return nil, false
}

func without(cs []*Candidate, x *Candidate) []*Candidate {
	var out []*Candidate
	for _, c := range cs {
		if c != x {
			out = append(out, c)
		}
	}
	return out
}

func podNames(pods []*apiv1.Pod) []string {
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Namespace + "/" + p.Name
	}
	return names
}
