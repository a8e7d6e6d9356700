package scaleup

import (
	"context"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// liveSlices returns a function giving a node's ResourceSlices as the DRA
// informers hold them now; it lists them at its first call only, so a loop
// pays for the listing once, and only when a template needs it.
func (o *Orchestrator) liveSlices(ctx context.Context) func(node string) []*resourceapi.ResourceSlice {
	var byNode map[string][]*resourceapi.ResourceSlice
	listed := false
	return func(node string) []*resourceapi.ResourceSlice {
		if !listed {
			listed = true
			var err error
			if byNode, err = o.sim.Snapshot().SourceResourceSlices(); err != nil {
				klog.FromContext(ctx).Error(err, "Templates made from nodes carry no ResourceSlices this loop")
			}
		}
		return byNode[node]
	}
}

// templateFromNodes makes the group's template from its first ready node
// (by name), or returns the last one made when it has none now. The
// template carries the node's ResourceSlices, renamed: the snapshot's
// (last loop's), or when it has none, such as in the first loop, live's
// (the informers'; live may be nil).
func (o *Orchestrator) templateFromNodes(st *clusterstate.GroupState, now time.Time, podsByNode map[string][]*apiv1.Pod,
	daemonSets []*appsv1.DaemonSet, live func(node string) []*resourceapi.ResourceSlice) *cloudprovider.NodeInfo {
	id := st.NodeGroup.Id()
	nodes := append([]*apiv1.Node(nil), st.Nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for _, n := range nodes {
		if n.Spec.Unschedulable || n.DeletionTimestamp != nil ||
			st.DevicesReadiness(n.Name, o.taints.NodeReadiness(n, now, st.Options.MaxNodeStartupTime)) != clusterstate.Ready {
			continue
		}
		info := o.sanitizer.FromNode(id, n, podsByNode[n.Name], daemonSets)
		sl := o.sim.Snapshot().ResourceSlices(n.Name)
		if len(sl) == 0 && live != nil {
			sl = live(n.Name)
		}
		if len(sl) > 0 {
			info.ResourceSlices = framework.RenamedResourceSlices(sl, n.Name, info.Node.Name)
		}
		o.fromNodes[id], o.fromNodesAt[id] = info, now
		return info
	}
	// The last template made stands in while the group has no ready node,
	// until --node-info-cache-expire-time has passed since it was made.
	if at, ok := o.fromNodesAt[id]; ok && o.opts.NodeInfoCacheExpireTime > 0 && now.Sub(at) > o.opts.NodeInfoCacheExpireTime {
		delete(o.fromNodes, id)
		delete(o.fromNodesAt, id)
	}
	return o.fromNodes[id]
}
