package scaleup

import (
	"context"
	"maps"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"k8s.io/autoscaler/cluster-autoscaler/capacityquota"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// totals are the cluster's nodes, cores, memory and GPUs, upcoming ones
// included, for the --max-nodes-total, --cores-total, --memory-total and
// --gpu-total limits.
type totals struct {
	nodes    int
	milliCPU int64
	memory   int64
	gpus     map[string]int64 // by GPU type
	// gpuOf tells a node's GPU type and count, extended resources or the
	// GPU devices of its ResourceSlices (cloudprovider.GPUsWithDevices).
	gpuOf func(*apiv1.Node, []*resourceapi.ResourceSlice) (string, int64)
	// quotas are the CapacityQuotas (--capacity-quotas-enabled) with what
	// the nodes they pick use, upcoming ones included.
	quotas []quotaUse
}

// quotaUse is one CapacityQuota and its use, in milli-units per resource.
type quotaUse struct {
	q    capacityquota.Quota
	used map[apiv1.ResourceName]int64
}

// clone copies t so that adding nodes to the copy leaves t as it is.
func (t *totals) clone() *totals {
	c := *t
	c.gpus = maps.Clone(t.gpus)
	c.quotas = make([]quotaUse, len(t.quotas))
	for i, qu := range t.quotas {
		c.quotas[i] = quotaUse{q: qu.q, used: maps.Clone(qu.used)}
	}
	return &c
}

// quotaRoom is how many more nodes like template the CapacityQuotas that
// pick it allow, and the name of the quota that allows the fewest; ok is
// false when no quota limits such nodes.
func (t *totals) quotaRoom(template *apiv1.Node) (room int, quota string, ok bool) {
	if template == nil {
		return 0, "", false
	}
	for _, qu := range t.quotas {
		if !qu.q.Applies(template) {
			continue
		}
		for res, limit := range qu.q.Limits {
			per := capacityquota.Amount(template, res)
			if per <= 0 {
				continue
			}
			n := 0
			if left := limit - qu.used[res]; left > 0 {
				n = int(min(left/per, 1<<30))
			}
			if !ok || n < room {
				room, quota, ok = n, qu.q.Name, true
			}
		}
	}
	return room, quota, ok
}

// gpuRoom is how many more nodes of perNode GPUs of type gpu --gpu-total
// allows, and whether a limit applies to that type.
func (t *totals) gpuRoom(limits []config.GPULimit, gpu string, perNode int64) (int, bool) {
	if gpu == "" || perNode <= 0 {
		return 0, false
	}
	for _, l := range limits {
		if l.Type == gpu {
			left := l.Max - t.gpus[gpu]
			if left <= 0 {
				return 0, true
			}
			return int(left / perNode), true
		}
	}
	return 0, false
}

func (o *Orchestrator) clusterTotals(ctx context.Context, in Input, groups map[string]*groupState, excluded map[string]bool) *totals {
	t := &totals{gpus: map[string]int64{}}
	if o.quotas != nil {
		for _, q := range o.quotas.Quotas(ctx) {
			t.quotas = append(t.quotas, quotaUse{q: q, used: map[apiv1.ResourceName]int64{}})
		}
	}
	if len(o.opts.GPUTotal) > 0 {
		t.gpuOf = func(n *apiv1.Node, slices []*resourceapi.ResourceSlice) (string, int64) {
			return cloudprovider.GPUsWithDevices(context.Background(), o.provider, n, slices)
		}
	}
	snap := o.sim.Snapshot()
	for _, n := range in.Nodes {
		if excluded[n.Name] {
			continue
		}
		t.addNode(n, snap.ResourceSlices(n.Name))
	}
	for _, gs := range groups {
		if gs.template != nil && gs.upcoming() > 0 {
			t.add(gs.upcoming(), gs.template)
		}
	}
	return t
}

// addNode counts node n, which publishes slices (its own, or for a node not
// yet started and for a template, those its drivers will publish).
func (t *totals) addNode(n *apiv1.Node, slices []*resourceapi.ResourceSlice) {
	for _, qu := range t.quotas {
		if qu.q.Applies(n) {
			for res := range qu.q.Limits {
				qu.used[res] += capacityquota.Amount(n, res)
			}
		}
	}
	t.nodes++
	t.milliCPU += n.Status.Capacity.Cpu().MilliValue()
	t.memory += n.Status.Capacity.Memory().Value()
	if t.gpuOf != nil {
		if gpu, c := t.gpuOf(n, slices); gpu != "" && c > 0 {
			if t.gpus == nil {
				t.gpus = map[string]int64{}
			}
			t.gpus[gpu] += c
		}
	}
}

func (t *totals) add(count int, info *cloudprovider.NodeInfo) {
	for i := 0; i < count; i++ {
		t.addNode(info.Node, info.ResourceSlices)
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
