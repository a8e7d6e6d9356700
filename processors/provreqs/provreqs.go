// Package provreqs is what the loop sees of ProvisioningRequests: processors
// over the request lifecycle that provreq/processor owns. Requests (one
// value, three roles) sets aside the pods that consume a live request,
// books, checks and scales up for the requests in the loop's scale-up
// session, and writes their conditions once the scale-up step is done.
//
// It may import provreq/processor, scaleup, clusterstate and processors; it
// must not import core or package main.
package provreqs

import (
	"context"

	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
	"k8s.io/autoscaler/cluster-autoscaler/provreq/processor"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
)

// Requests runs ProvisioningRequests through the loop. It is a pod-list
// processor (ConsumingPods: the requests' lifecycle moves on and the pods
// that consume a live request are set aside), a capacity processor
// (bookings, check-capacity, all-or-nothing scale-ups) and a scale-up
// status processor (conditions and events written). It holds the loop's
// request state from the pod list to the status, so one value must sit in
// all three lists, and one loop uses it at a time.
type Requests struct {
	p     *processor.Processor
	state *clusterstate.Registry
	loop  *processor.Loop
}

// New wraps the request processor; state answers questions about the
// instances of attempts in flight.
func New(p *processor.Processor, state *clusterstate.Registry) *Requests {
	return &Requests{p: p, state: state}
}

// ProcessPods implements processors.PodListProcessor: it begins the loop's
// request work and returns the pods that do not consume a live request.
func (r *Requests) ProcessPods(ctx context.Context, loop *processors.Loop, pods []*apiv1.Pod) []*apiv1.Pod {
	r.loop = r.p.Begin(ctx, processor.Input{Now: loop.Now, ScheduledPods: loop.ScheduledPods, PendingPods: pods})
	return r.loop.Pending()
}

// HasWork implements processors.CapacityProcessor.
func (r *Requests) HasWork() bool { return r.loop != nil && r.loop.HasWork() }

// ProcessCapacity implements processors.CapacityProcessor.
func (r *Requests) ProcessCapacity(ctx context.Context, loop *processors.Loop, session *scaleup.Session) bool {
	if r.loop == nil {
		return false
	}
	return r.loop.Run(ctx, session, loop.Nodes, registryInstances(r.state))
}

// ScaleUpDone implements processors.ScaleUpStatusProcessor: the requests'
// statuses and events are written, and the loop's state dropped.
func (r *Requests) ScaleUpDone(ctx context.Context, _ *processors.Loop, _ processors.ScaleUpStatus) {
	if r.loop == nil {
		return
	}
	r.loop.Finish(ctx)
	r.loop = nil
}

// WaitingForNodes reports whether an all-or-nothing request waits for new
// nodes to join; see processor.Processor.WaitingForNodes.
func (r *Requests) WaitingForNodes() bool { return r.p.WaitingForNodes() }

// Holding reports whether node is held for a ProvisioningRequest (the
// nodes of an all-or-nothing request), and why; see
// processor.Processor.Holding. The disruption engine protects those nodes.
func (r *Requests) Holding(node string) (bool, string) { return r.p.Holding(node) }

// registryInstances answers the request processor's questions about node
// groups and their instances from the loop's cluster state.
func registryInstances(state *clusterstate.Registry) processor.Instances {
	return processor.InstanceViews(func(group string) (processor.GroupView, bool) {
		gs := state.Group(group)
		if gs == nil {
			return processor.GroupView{}, false
		}
		nodes := make(map[string]*apiv1.Node, len(gs.Nodes))
		for _, n := range gs.Nodes {
			nodes[n.Name] = n
		}
		identities := state.Identities()
		view := processor.GroupView{Target: gs.Target, Instances: make([]processor.InstanceState, 0, len(gs.Instances))}
		for _, in := range gs.Instances {
			st := processor.InstanceState{Id: in.Id}
			if identities != nil {
				if name, m := identities.NodeOf(in.Id); m == cloudprovider.SureMatch {
					st.Node = nodes[name]
				}
			}
			if in.Status != nil {
				if in.Status.ErrorInfo != nil {
					st.Error = in.Status.ErrorInfo.ErrorCode + ": " + in.Status.ErrorInfo.ErrorMessage
				}
				st.Deleting = in.Status.State == cloudprovider.InstanceDeleting
			}
			view.Instances = append(view.Instances, st)
		}
		return view, true
	})
}
