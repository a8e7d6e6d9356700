package core

import (
	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/provreq/processor"
)

// registryInstances answers the ProvisioningRequest processor's questions
// about node groups and their instances from the loop's cluster state.
func registryInstances(state *clusterstate.Registry) processor.Instances {
	return processor.InstanceViews(func(group string) (processor.GroupView, bool) {
		gs := state.Group(group)
		if gs == nil {
			return processor.GroupView{}, false
		}
		nodes := make(map[string]*apiv1.Node, len(gs.Nodes))
		for _, n := range gs.Nodes {
			nodes[clusterstate.NormalizeProviderID(n.Spec.ProviderID)] = n
		}
		view := processor.GroupView{Target: gs.Target, Instances: make([]processor.InstanceState, 0, len(gs.Instances))}
		for _, in := range gs.Instances {
			st := processor.InstanceState{Id: in.Id, Node: nodes[clusterstate.NormalizeProviderID(in.Id)]}
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
