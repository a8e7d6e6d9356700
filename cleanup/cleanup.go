// Package cleanup removes broken capacity: instances that never registered
// within the provision time, instances whose creation failed, and target
// sizes that no instance backs. Every deletion names the instance, carries
// a reason, respects the group's minimum unless forced, is capped per loop,
// and is recorded (metric, event, one V(0) log line). A circuit breaker
// stops the deletion of unregistered instances when so many look
// unregistered at once that the cause is more likely a provider-ID mismatch
// than broken machines. An instance it deleted is not deleted again while
// its provider still lists it, for the group's provision time: a deletion
// is asked for, and counted, once. It decides from the cluster state registry and
// acts through the cloud provider; it must not import core/ or scaleup/.
package cleanup

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
)

// Deletion reasons, the values of deleted_nodes_total's reason label.
const (
	ReasonUnregistered   = "unregistered"
	ReasonFailedCreation = "failed-creation"
)

// Options are the cleanup's settings, from the flags.
type Options struct {
	// ForceDeleteUnregistered and ForceDeleteFailed delete below the
	// group's minimum size.
	ForceDeleteUnregistered bool
	ForceDeleteFailed       bool
	// MaxDeletionsPerLoop caps the instances deleted in one loop.
	MaxDeletionsPerLoop int
	// BreakerRatio: when more than this share of a group's instances (or of
	// all instances) is long unregistered, and more than BreakerMinimum of
	// them, none of them is deleted.
	BreakerRatio   float64
	BreakerMinimum int
	// DryRun logs what would be deleted and deletes nothing.
	DryRun bool
}

// Metrics receives the cleanup's numbers; metrics.Metrics implements it.
type Metrics interface {
	RegisterDeletedNodes(reason string, n int)
	RegisterOldUnregisteredNodesRemoved(n int)
	UpdateUnregisteredBreaker(open bool)
}

// Cleaner runs the cleanup step of the loop.
type Cleaner struct {
	opts     Options
	provider cloudprovider.CloudProvider
	metrics  Metrics
	recorder record.EventRecorder
	// target is where events without a Node go (the status ConfigMap).
	target *apiv1.ObjectReference
	// drift remembers since when a group's target exceeds its instances.
	drift map[string]driftState
	// deleted remembers when each instance (by group and id) was deleted,
	// while its provider still lists it.
	deleted map[inflightKey]time.Time
}

type inflightKey struct{ group, id string }

type driftState struct {
	target, instances int
	since             time.Time
}

// Option configures a Cleaner.
type Option func(*Cleaner)

// WithEvents records an event per deletion: on the Node when there is one,
// else on target.
func WithEvents(r record.EventRecorder, target *apiv1.ObjectReference) Option {
	return func(c *Cleaner) { c.recorder, c.target = r, target }
}

// New builds a Cleaner.
func New(opts Options, provider cloudprovider.CloudProvider, m Metrics, options ...Option) *Cleaner {
	c := &Cleaner{opts: opts, provider: provider, metrics: m, drift: map[string]driftState{},
		deleted: map[inflightKey]time.Time{}}
	for _, o := range options {
		o(c)
	}
	return c
}

// Result says what one cleanup did.
type Result struct {
	// Deleted are the instances deleted (or, in a dry run, that would be).
	Deleted int
	// Resized counts the groups whose target size was decreased.
	Resized int
	// BreakerOpen lists the scopes ("cluster" or group ids) whose
	// unregistered instances were kept because the breaker tripped.
	BreakerOpen []string
}

// Changed reports whether the cluster was changed, so the loop should look
// again before deciding anything else.
func (r Result) Changed() bool { return r.Deleted > 0 || r.Resized > 0 }

// victim is one instance chosen for deletion.
type victim struct {
	id, reason, detail string
}

// Run deletes the broken instances the registry saw in this loop and fixes
// targets that no instance backs.
func (c *Cleaner) Run(ctx context.Context, state *clusterstate.Registry, now time.Time) Result {
	var res Result
	groups := state.Groups()
	totalInstances, totalLong := 0, 0
	for _, gs := range groups {
		totalInstances += len(gs.Instances)
		totalLong += len(gs.LongUnregistered)
	}
	clusterOpen := c.tripped(totalLong, totalInstances)
	if clusterOpen {
		res.BreakerOpen = append(res.BreakerOpen, "cluster")
	}
	budget := c.opts.MaxDeletionsPerLoop
	c.forgetGone(groups)
	for _, gs := range groups {
		id := gs.NodeGroup.Id()
		room := gs.Target - gs.NodeGroup.MinSize() // deletions allowed before the minimum
		var failed, unregistered []victim
		for _, in := range gs.FailedInstances {
			if c.inFlight(ctx, gs, in.Id, now) {
				continue
			}
			detail := "creation failed"
			if in.Status != nil && in.Status.ErrorInfo != nil {
				detail = fmt.Sprintf("creation failed: %s: %s", in.Status.ErrorInfo.ErrorCode, in.Status.ErrorInfo.ErrorMessage)
			}
			failed = append(failed, victim{id: in.Id, reason: ReasonFailedCreation, detail: detail})
		}
		groupOpen := c.tripped(len(gs.LongUnregistered), len(gs.Instances))
		switch {
		case len(gs.LongUnregistered) == 0:
		case clusterOpen || groupOpen:
			if groupOpen {
				res.BreakerOpen = append(res.BreakerOpen, id)
			}
			c.breakerTripped(ctx, id, len(gs.LongUnregistered), len(gs.Instances), clusterOpen)
		default:
			for _, u := range gs.LongUnregistered {
				if u.Node != "" {
					c.lookalike(ctx, id, u)
					continue
				}
				if c.inFlight(ctx, gs, u.Id, now) {
					continue
				}
				unregistered = append(unregistered, victim{id: u.Id, reason: ReasonUnregistered,
					detail: fmt.Sprintf("no Node registered since %s (max provision time %v)", u.Since.UTC().Format(time.RFC3339),
						gs.Options.MaxNodeProvisionTime)})
			}
		}
		for _, batch := range []struct {
			victims []victim
			force   bool
		}{{failed, c.opts.ForceDeleteFailed}, {unregistered, c.opts.ForceDeleteUnregistered}} {
			vs := batch.victims
			if !batch.force {
				if room <= 0 && len(vs) > 0 {
					klog.FromContext(ctx).Info("Keeping broken instances: the node group is at its minimum size",
						"nodeGroup", id, "instances", ids(vs), "reason", vs[0].reason, "minSize", gs.NodeGroup.MinSize())
				}
				vs = vs[:min(len(vs), max(0, room))]
			}
			if len(vs) > budget {
				klog.FromContext(ctx).Info("Deletion cap reached; the rest waits for the next loop", "nodeGroup", id,
					"maxPerLoop", c.opts.MaxDeletionsPerLoop, "waiting", len(vs)-budget)
				vs = vs[:budget]
			}
			if len(vs) == 0 {
				continue
			}
			n := c.delete(ctx, gs.NodeGroup, vs, batch.force, now)
			budget -= n
			room -= n
			res.Deleted += n
		}
		if c.fixSize(ctx, gs, now) {
			res.Resized++
		}
	}
	c.metrics.UpdateUnregisteredBreaker(len(res.BreakerOpen) > 0)
	return res
}

// forgetGone drops the deletions of instances no group lists any more.
func (c *Cleaner) forgetGone(groups []*clusterstate.GroupState) {
	if len(c.deleted) == 0 {
		return
	}
	listed := map[inflightKey]bool{}
	for _, gs := range groups {
		for _, in := range gs.Instances {
			listed[inflightKey{gs.NodeGroup.Id(), in.Id}] = true
		}
	}
	for k := range c.deleted {
		if !listed[k] {
			delete(c.deleted, k)
		}
	}
}

// inFlight reports whether instance id of gs was deleted by this Cleaner
// less than the group's provision time ago: its provider has not caught up
// yet, and deleting it again would ask (and count) twice. Past that time
// the deletion is taken for lost and asked for again.
func (c *Cleaner) inFlight(ctx context.Context, gs *clusterstate.GroupState, id string, now time.Time) bool {
	k := inflightKey{gs.NodeGroup.Id(), id}
	at, ok := c.deleted[k]
	if !ok {
		return false
	}
	if wait := gs.Options.MaxNodeProvisionTime; now.Sub(at) <= wait {
		klog.FromContext(ctx).V(4).Info("Broken instance deleted already, deletion in flight; not deleting it again",
			"instance", id, "nodeGroup", k.group, "deletedAt", at)
		return true
	}
	klog.FromContext(ctx).Info("Broken instance deleted a while ago is still listed; deleting it again", "instance", id,
		"nodeGroup", k.group, "deletedAt", at, "wait", gs.Options.MaxNodeProvisionTime)
	delete(c.deleted, k)
	return false
}

// tripped applies the circuit breaker to long unregistered out of total.
func (c *Cleaner) tripped(long, total int) bool {
	return long > c.opts.BreakerMinimum && total > 0 && float64(long) > c.opts.BreakerRatio*float64(total)
}

func (c *Cleaner) breakerTripped(ctx context.Context, group string, long, total int, cluster bool) {
	scope := "the node group"
	if cluster {
		scope = "the cluster"
	}
	msg := fmt.Sprintf("Not deleting %d of %d instances of %s that look unregistered: too large a share of %s at once "+
		"(more than %.0f%% and more than %d); a provider ID mismatch between instances and Nodes looks likelier than broken machines",
		long, total, group, scope, 100*c.opts.BreakerRatio, c.opts.BreakerMinimum)
	klog.FromContext(ctx).Info("Unregistered-instance circuit breaker open", "nodeGroup", group, "longUnregistered", long,
		"instances", total, "scope", scope)
	if c.recorder != nil && c.target != nil {
		c.recorder.Event(c.target, apiv1.EventTypeWarning, "DeleteUnregisteredBlocked", msg)
	}
}

// lookalike records an unregistered instance that is not deleted because a
// Node may be it (cloudprovider.Identify): deleting the instance would then
// delete that registered Node.
func (c *Cleaner) lookalike(ctx context.Context, group string, u clusterstate.UnregisteredInstance) {
	klog.FromContext(ctx).Info("Not deleting an unregistered instance: a Node may be it", "instance", u.Id,
		"nodeGroup", group, "node", u.Node, "why", u.NodeWhy, "since", u.Since)
	if c.recorder != nil {
		why := ""
		if u.NodeWhy != "" {
			why = " (" + u.NodeWhy + ")"
		}
		ref := &apiv1.ObjectReference{Kind: "Node", Name: u.Node}
		c.recorder.Eventf(ref, apiv1.EventTypeWarning, "ProviderIDMismatch",
			"Node %s may be instance %s of node group %s%s, though its provider ID does not name it for sure: the instance is not deleted as unregistered; check the Node's spec.providerID",
			u.Node, u.Id, group, why)
	}
}

// delete removes the victims of one group by name and records each.
func (c *Cleaner) delete(ctx context.Context, ng cloudprovider.NodeGroup, vs []victim, force bool, now time.Time) int {
	logger := klog.FromContext(ctx)
	if c.opts.DryRun {
		for _, v := range vs {
			logger.Info("Dry run: would delete instance", "instance", v.id, "nodeGroup", ng.Id(), "reason", v.reason,
				"detail", v.detail)
		}
		return 0
	}
	nodes := make([]*apiv1.Node, len(vs))
	for i, v := range vs {
		nodes[i] = cloudprovider.InstanceNode(v.id)
	}
	var err error
	if force {
		err = ng.ForceDeleteNodes(ctx, nodes)
		if errors.Is(err, cloudprovider.ErrNotImplemented) {
			err = ng.DeleteNodes(ctx, nodes)
		}
	} else {
		err = ng.DeleteNodes(ctx, nodes)
	}
	if err != nil {
		logger.Error(err, "Deleting broken instances failed; retried next loop", "nodeGroup", ng.Id(), "instances", ids(vs),
			"reason", vs[0].reason)
		for _, v := range vs {
			c.event(apiv1.EventTypeWarning, "DeleteUnregisteredFailed", "Failed to delete instance %s of %s (%s): %v",
				v.id, ng.Id(), v.reason, err)
		}
		return 0
	}
	for _, v := range vs {
		c.deleted[inflightKey{ng.Id(), v.id}] = now
		logger.Info("Deleted broken instance", "instance", v.id, "nodeGroup", ng.Id(), "reason", v.reason, "detail", v.detail)
		c.event(apiv1.EventTypeNormal, "DeleteUnregistered", "Deleted instance %s of %s (%s): %s", v.id, ng.Id(), v.reason, v.detail)
	}
	c.metrics.RegisterDeletedNodes(vs[0].reason, len(vs))
	if vs[0].reason == ReasonUnregistered {
		c.metrics.RegisterOldUnregisteredNodesRemoved(len(vs))
	}
	return len(vs)
}

// fixSize lowers a target that has exceeded the group's instances for
// longer than the provision time: the missing instances were never created
// and will not be. It never deletes an instance.
func (c *Cleaner) fixSize(ctx context.Context, gs *clusterstate.GroupState, now time.Time) bool {
	id := gs.NodeGroup.Id()
	missing := gs.Target - len(gs.Instances)
	if missing <= 0 {
		delete(c.drift, id)
		return false
	}
	d, ok := c.drift[id]
	if !ok || d.target != gs.Target || d.instances != len(gs.Instances) {
		c.drift[id] = driftState{target: gs.Target, instances: len(gs.Instances), since: now}
		return false
	}
	if now.Sub(d.since) <= gs.Options.MaxNodeProvisionTime {
		return false
	}
	logger := klog.FromContext(ctx)
	if c.opts.DryRun {
		logger.Info("Dry run: would decrease the target size", "nodeGroup", id, "target", gs.Target, "instances", len(gs.Instances))
		return false
	}
	if err := gs.NodeGroup.DecreaseTargetSize(ctx, -missing); err != nil {
		logger.Error(err, "Fixing the target size failed", "nodeGroup", id, "target", gs.Target, "instances", len(gs.Instances))
		return false
	}
	delete(c.drift, id)
	logger.Info("Fixed the target size of a node group: instances never created", "nodeGroup", id, "from", gs.Target,
		"to", gs.Target-missing, "since", d.since)
	c.event(apiv1.EventTypeNormal, "FixNodeGroupSize", "Decreased the target size of %s from %d to %d: %d instances were never created",
		id, gs.Target, gs.Target-missing, missing)
	return true
}

func (c *Cleaner) event(kind, reason, format string, args ...any) {
	if c.recorder != nil && c.target != nil {
		c.recorder.Eventf(c.target, kind, reason, format, args...)
	}
}

func ids(vs []victim) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.id
	}
	sort.Strings(out)
	return out
}
