package scaledown

import (
	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/drain"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// simulatorSession is a Session that holds the loop's simulator
// (*scaleup.Session does).
type simulatorSession interface {
	Simulator() *framework.Handle
}

// podsByNodeOf groups the input's scheduled pods by node. When the session's
// snapshot was reset with the same pod list (the loop's case), its grouping
// is taken instead of grouping every pod a second time, and that snapshot is
// returned: its node versions then describe exactly the pods grouped here.
func podsByNodeOf(in Input) (map[string][]*apiv1.Pod, *framework.Snapshot) {
	ss, ok := in.Session.(simulatorSession)
	if !ok || ss.Simulator() == nil {
		return framework.PodsByNode(in.ScheduledPods), nil
	}
	snap := ss.Simulator().Snapshot()
	byNode, reused := snap.ResetPodsByNode(in.ScheduledPods)
	if !reused {
		return byNode, nil
	}
	return byNode, snap
}

// usageMemo keeps, per node, the sums utilization adds up from the node's
// pods, with the node's version (framework.NodeVersion: its Node object and
// pod objects) and the option they were added under. A node whose version
// is the same in the next loop gets its sums without reading its pods.
type usageMemo struct {
	byNode map[string]usageSums
	loop   uint64
}

// usageSums is what utilization reads of a node and its pods: the
// requests that count (cpu, memory and the node's GPU resource), the
// node's allocatable ones, and whether it is a GPU node.
type usageSums struct {
	version                      framework.NodeVersion
	ignoreDS                     bool
	cpu, mem, gpu                int64
	allocCPU, allocMem, allocGPU int64
	gpuNode                      bool
	loop                         uint64
}

// sums returns what utilization reads of n and pods, from the memo when
// n's version and the option are those it was read under.
func (p *Planner) sums(n *apiv1.Node, pods []*apiv1.Pod, o config.NodeGroupAutoscalingOptions, in Input) usageSums {
	var version framework.NodeVersion
	versioned := false
	if in.reset != nil {
		version, versioned = in.reset.ResetNodeVersion(n.Name)
	}
	m := &p.usage
	if versioned {
		if e, ok := m.byNode[n.Name]; ok && e.version == version && e.ignoreDS == o.IgnoreDaemonSetsUtilization {
			e.loop = m.loop
			m.byNode[n.Name] = e
			return e
		}
	}
	gpuName := cloudprovider.NodeGPUResource(n)
	var cpu, mem, gpu int64
	for _, pod := range pods {
		if pod.Status.Phase == apiv1.PodSucceeded || pod.Status.Phase == apiv1.PodFailed {
			continue
		}
		if o.IgnoreDaemonSetsUtilization && drain.IsDaemonSetPod(pod) {
			continue
		}
		if p.opts.IgnoreMirrorPodsUtilization && drain.IsMirrorPod(pod) {
			continue
		}
		r := p.requests.Get(pod, framework.RequestOf)
		cpu += r.MilliCPU
		mem += r.Memory
		for _, c := range pod.Spec.Containers {
			if q, ok := c.Resources.Requests[gpuName]; ok {
				gpu += q.Value()
			}
		}
	}
	e := usageSums{version: version, ignoreDS: o.IgnoreDaemonSetsUtilization, cpu: cpu, mem: mem, gpu: gpu,
		allocCPU: n.Status.Allocatable.Cpu().MilliValue(), allocMem: n.Status.Allocatable.Memory().Value(),
		allocGPU: n.Status.Allocatable.Name(gpuName, "").Value(), gpuNode: p.isGPUNode(n), loop: m.loop}
	if versioned {
		if m.byNode == nil {
			m.byNode = map[string]usageSums{}
		}
		m.byNode[n.Name] = e
	}
	return e
}

// rotate ends a loop: the nodes whose sums it did not ask for are
// forgotten (gone, or no longer versioned), which also lets their old
// NodeInfos go.
func (m *usageMemo) rotate() {
	for name, e := range m.byNode {
		if e.loop != m.loop {
			delete(m.byNode, name)
		}
	}
	m.loop++
}

// utilization is max(cpu, memory) requested over allocatable, DaemonSet and
// mirror pods left out as the flags say. On accelerator nodes (accelerator
// is then true) it is their devices': the share of the node's DRA devices
// that allocated claims hold, or GPUs requested over allocatable (the
// larger, for a node that has both).
func (p *Planner) utilization(n *apiv1.Node, pods []*apiv1.Pod, o config.NodeGroupAutoscalingOptions,
	in Input) (u float64, accelerator bool) {
	e := p.sums(n, pods, o, in)
	dra, hasDevices := deviceShare(in.Session, n)
	if e.gpuNode || hasDevices {
		if total := e.allocGPU; total > 0 {
			return max(dra, float64(e.gpu)/float64(total)), true
		}
		if hasDevices {
			return dra, true
		}
		accelerator = true
	}
	if a := e.allocCPU; a > 0 {
		u = float64(e.cpu) / float64(a)
	}
	if a := e.allocMem; a > 0 {
		u = max(u, float64(e.mem)/float64(a))
	}
	return u, accelerator
}
