package framework

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Partitionable devices (KEP-4815, how NVIDIA's MIG is offered through DRA)
// are devices that consume counters of a counter set their pool shares
// (ResourceSlice spec.sharedCounters, device consumesCounters): a GPU's
// memory and compute slices are one counter set, and its whole-GPU device
// and every 1g/2g/3g partition draw on it. The scheduler's DynamicResources
// plugin allocates them (the DRAPartitionableDevices gate, on by default
// since 1.36); the snapshot only has to keep counter sets with their
// devices, which RenamedResourceSlices does (a pool renamed in every slice
// alike). What the snapshot adds is how full such a node is.

// poolKey names a pool: driver and pool name.
type poolKey struct{ driver, pool string }

// counterSetKey names one counter set of one pool.
type counterSetKey struct {
	pool poolKey
	set  string
}

// DeviceShare is the share of node name's DRA devices that allocated claims
// in the snapshot hold, weighing partitionable devices by what they
// consume: each counter set some device of the node consumes counts as one
// unit, used by the largest share of any of its counters that allocated
// devices consume (capped at 1); each device that consumes no counter set
// of its pool counts as one unit, used when allocated. A node with one GPU
// cut into 7 slices, one slice allocated, is 1/7 used (not 1 of its 13
// devices, nor full); the whole-GPU device allocated makes it fully used.
// ok is false when the node publishes no device.
func (s *Snapshot) DeviceShare(name string) (share float64, ok bool) {
	slices := s.ResourceSlices(name)
	if len(slices) == 0 {
		return 0, false
	}
	totals := counterTotals(slices)
	used := s.allocatedDevices()
	consumed := map[counterSetKey]map[string]float64{}
	consumers := map[counterSetKey]bool{}
	var units, usedUnits float64
	for _, sl := range slices {
		pool := poolKey{sl.Spec.Driver, sl.Spec.Pool.Name}
		for i := range sl.Spec.Devices {
			d := &sl.Spec.Devices[i]
			allocated := used.Has(structured.MakeDeviceID(sl.Spec.Driver, sl.Spec.Pool.Name, d.Name))
			partitioned := false
			for _, c := range d.ConsumesCounters {
				k := counterSetKey{pool, c.CounterSet}
				if _, known := totals[k]; !known {
					continue
				}
				partitioned, consumers[k] = true, true
				if !allocated {
					continue
				}
				if consumed[k] == nil {
					consumed[k] = map[string]float64{}
				}
				for counter, q := range c.Counters {
					consumed[k][counter] += q.Value.AsApproximateFloat64()
				}
			}
			if partitioned {
				continue
			}
			units++
			if allocated {
				usedUnits++
			}
		}
	}
	for k := range consumers {
		units++
		usedUnits += setShare(totals[k], consumed[k])
	}
	if units == 0 {
		return 0, false
	}
	return usedUnits / units, true
}

// counterTotals collects the counter sets the slices share, by pool: what
// each counter of each set holds.
func counterTotals(slices []*resourceapi.ResourceSlice) map[counterSetKey]map[string]float64 {
	out := map[counterSetKey]map[string]float64{}
	for _, sl := range slices {
		pool := poolKey{sl.Spec.Driver, sl.Spec.Pool.Name}
		for _, set := range sl.Spec.SharedCounters {
			m := map[string]float64{}
			for name, c := range set.Counters {
				m[name] = c.Value.AsApproximateFloat64()
			}
			out[counterSetKey{pool, set.Name}] = m
		}
	}
	return out
}

// setShare is the largest share of any counter of a set that consumed
// takes, at most 1; counters that hold nothing are left out.
func setShare(total, consumed map[string]float64) float64 {
	share := 0.0
	for name, t := range total {
		if t <= 0 {
			continue
		}
		share = max(share, consumed[name]/t)
	}
	return min(share, 1)
}
