package scaleup

import (
	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// totals are the cluster's nodes, cores and memory, upcoming ones included,
// for the --max-nodes-total, --cores-total and --memory-total limits.
type totals struct {
	nodes    int
	milliCPU int64
	memory   int64
}

func (o *Orchestrator) clusterTotals(in Input, groups map[string]*groupState, excluded map[string]bool) *totals {
	t := &totals{}
	for _, n := range in.Nodes {
		if excluded[n.Name] {
			continue
		}
		t.addNode(n)
	}
	for _, gs := range groups {
		if gs.template != nil && gs.upcoming() > 0 {
			t.add(gs.upcoming(), gs.template)
		}
	}
	return t
}

func (t *totals) addNode(n *apiv1.Node) {
	t.nodes++
	t.milliCPU += n.Status.Capacity.Cpu().MilliValue()
	t.memory += n.Status.Capacity.Memory().Value()
}

func (t *totals) add(count int, info *cloudprovider.NodeInfo) {
	for i := 0; i < count; i++ {
		t.addNode(info.Node)
	}
}

// nodeRoom is how many nodes --max-nodes-total still allows (0 means no limit).
func (t *totals) nodeRoom(maxTotal int) int {
	if maxTotal <= 0 {
		return 1 << 30
	}
	return maxTotal - t.nodes
}

// cpuRoom is the milli-CPU --cores-total still allows; 0 would mean
// unlimited to the estimator, so an exhausted limit is reported as -1.
func (t *totals) cpuRoom(maxCores int64) int64 {
	room := maxCores*1000 - t.milliCPU
	if room <= 0 {
		return -1
	}
	return room
}

func (t *totals) memoryRoom(maxGiB int64) int64 {
	room := maxGiB<<30 - t.memory
	if room <= 0 {
		return -1
	}
	return room
}
