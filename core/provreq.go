package core

import (
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/provreq/processor"
)

// registryInstances answers the ProvisioningRequest processor's questions
// about an attempt's instances from the loop's cluster state.
func registryInstances(state *clusterstate.Registry) processor.Instances {
	return processor.InstanceStates(func(group, id string) processor.InstanceState {
		gs := state.Group(group)
		if gs == nil {
			return processor.InstanceState{}
		}
		var st processor.InstanceState
		for _, in := range gs.Instances {
			if in.Id != id {
				continue
			}
			st.Exists = true
			if in.Status != nil && in.Status.ErrorInfo != nil {
				st.Error = in.Status.ErrorInfo.ErrorCode + ": " + in.Status.ErrorInfo.ErrorMessage
			}
		}
		for _, n := range gs.Nodes {
			if clusterstate.NormalizeProviderID(n.Spec.ProviderID) == clusterstate.NormalizeProviderID(id) {
				st.Node = n
				st.Exists = true
			}
		}
		return st
	})
}
