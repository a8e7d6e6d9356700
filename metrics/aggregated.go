package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Function labels of function_aggregated_duration_seconds: upstream's
// names for the steps of its DRA snapshot, which run many times in a loop
// (kubernetes/autoscaler #9246). Here the DRA objects live in the one
// snapshot, so its Fork, Commit and Revert are recorded under upstream's
// labels of those steps while the snapshot holds DRA objects.
const (
	AggregatedDRASnapshotWrapSchedulerNodeInfo        = "dra:snapshot:WrapSchedulerNodeInfo"
	AggregatedDRASnapshotAddClaims                    = "dra:snapshot:AddClaims"
	AggregatedDRASnapshotRemovePodOwnedClaims         = "dra:snapshot:RemovePodOwnedClaims"
	AggregatedDRASnapshotPodClaims                    = "dra:snapshot:PodClaims"
	AggregatedDRASnapshotReservePodClaims             = "dra:snapshot:ReservePodClaims"
	AggregatedDRASnapshotUnreservePodClaims           = "dra:snapshot:UnreservePodClaims"
	AggregatedDRASnapshotNodeResourceSlices           = "dra:snapshot:NodeResourceSlices"
	AggregatedDRASnapshotAddNodeResourceSlices        = "dra:snapshot:AddNodeResourceSlices"
	AggregatedDRASnapshotRemoveNodeResourceSlices     = "dra:snapshot:RemoveNodeResourceSlices"
	AggregatedDRASnapshotSignalClaimPendingAllocation = "dra:snapshot:SignalClaimPendingAllocation"
	AggregatedDRASnapshotListAllAllocatedDevices      = "dra:snapshot:ListAllAllocatedDevices"
	AggregatedDRASnapshotGatherAllocatedState         = "dra:snapshot:GatherAllocatedState"
	AggregatedDRASnapshotCommit                       = "dra:snapshot:Commit"
	AggregatedDRASnapshotRevert                       = "dra:snapshot:Revert"
	AggregatedDRASnapshotFork                         = "dra:snapshot:Fork"
)

// aggregatedDurations sums the time of repeated steps over one loop and
// observes each sum once per loop (Flush), as upstream's
// function_aggregated_duration_seconds. Steps may be timed from several
// goroutines, hence the mutex.
type aggregatedDurations struct {
	hist *prometheus.HistogramVec
	mu   sync.Mutex
	sums map[string]time.Duration
}

func newAggregatedDurations() *aggregatedDurations {
	return &aggregatedDurations{
		hist: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "function_aggregated_duration_seconds",
			Help: "Time taken by steps that run many times in a loop, summed over each loop.",
			// Upstream's layout for this family: 0.01s x 1.5^n, 30 buckets.
			Buckets: prometheus.ExponentialBuckets(0.01, 1.5, 30),
		}, []string{"function"}),
		sums: map[string]time.Duration{},
	}
}

// AddAggregatedDuration adds d to this loop's sum for function.
func (m *Metrics) AddAggregatedDuration(function string, d time.Duration) {
	a := m.aggregated
	a.mu.Lock()
	a.sums[function] += d
	a.mu.Unlock()
}

// FlushAggregatedDurations observes the loop's sum of every function timed
// since the last flush, then starts the next loop's sums at zero. A function
// not timed in the loop is not observed.
func (m *Metrics) FlushAggregatedDurations() {
	a := m.aggregated
	a.mu.Lock()
	sums := a.sums
	a.sums = make(map[string]time.Duration, len(sums))
	a.mu.Unlock()
	for f, d := range sums {
		a.hist.WithLabelValues(f).Observe(d.Seconds())
	}
}
