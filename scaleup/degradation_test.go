package scaleup

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

// skipCounter records SkippedPods calls.
type skipCounter struct {
	nopReporter
	calls []int
}

func (r *skipCounter) SkippedPods(_ context.Context, n int) { r.calls = append(r.calls, n) }

// threeReplicaSets are 3 ReplicaSets of 2 pending pods of 3 CPU each: three
// equivalence groups, each needing 2 nodes of 4 CPU.
func threeReplicaSets() []*apiv1.Pod {
	pods := pendingPods(6, "3")
	for i, p := range pods {
		rs := fmt.Sprintf("rs-%d", i/2)
		p.OwnerReferences[0].Name, p.OwnerReferences[0].UID = rs, types.UID(rs)
	}
	return pods
}

// --enable-graceful-degradation with --pending-pods-batching-timeout: once
// the check of pending pods against existing and upcoming nodes has used
// the timeout, the equivalence groups it has not reached are skipped in
// this loop (neither fitted nor scaled up for) and counted; the reporter
// hears the count, 0 included. Without the flag every group is checked,
// however long it takes.
func TestGracefulDegradationSkipsThePodsPastTheTimeout(t *testing.T) {
	for _, tc := range []struct {
		name        string
		degradation bool
		wantSkipped int
		wantNodes   int
	}{
		// The clock moves 10 s per read: the timeout (25 s) is read first,
		// the step's timer next, then each group's check: the first group
		// is checked 20 s in, the second 30 s in, past the timeout.
		{"degradation: one group checked, two skipped", true, 4, 2},
		{"no degradation: every group checked", false, 0, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fakeprovider.NewProvider()
			p.AddNodeGroup("g", 0, 100, 0, templateNode("g", "4"))
			o := newOrchestrator(t, p, func(o *Options) {
				o.EnableGracefulDegradation = tc.degradation
				o.PendingPodsBatchingTimeout = 25 * time.Second
				o.MaxBinpackingTime = time.Hour
				o.MaxNodeGroupBinpackingDuration = time.Hour
			})
			r := &skipCounter{}
			o.report = r
			o.clock = &tickingClock{t: time.Now(), step: 10 * time.Second}
			pods := threeReplicaSets()
			res, err := runLoop(context.Background(), o, Input{Now: time.Now(), Pending: pods})
			if err != nil {
				t.Fatal(err)
			}
			if res.Skipped != tc.wantSkipped {
				t.Errorf("skipped %d, want %d", res.Skipped, tc.wantSkipped)
			}
			if got := increases(res)["g"]; got != tc.wantNodes {
				t.Errorf("nodes added %d, want %d", got, tc.wantNodes)
			}
			if len(res.Remaining) != 0 {
				t.Errorf("remaining %d pods, want none (skipped pods are not reasons of their own)", len(res.Remaining))
			}
			if diff := cmp.Diff([]int{tc.wantSkipped}, r.calls); diff != "" {
				t.Errorf("SkippedPods calls (-want +got):\n%s", diff)
			}
		})
	}
}

// A backlog too large for one timeout is checked over several loops: the
// next loop checks the groups the last one skipped first, rather than the
// same first group again.
func TestGracefulDegradationChecksTheSkippedGroupsNext(t *testing.T) {
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("g", 0, 100, 0, templateNode("g", "4"))
	o := newOrchestrator(t, p, func(o *Options) {
		o.EnableGracefulDegradation = true
		o.PendingPodsBatchingTimeout = 25 * time.Second
		o.MaxBinpackingTime = time.Hour
		o.MaxNodeGroupBinpackingDuration = time.Hour
	})
	o.clock = &tickingClock{t: time.Now(), step: 10 * time.Second}
	pods := threeReplicaSets()
	skippedSets := func() []string {
		seen := map[string]bool{}
		var out []string
		for _, p := range pods {
			if _, skipped := o.skippedLast[p.UID]; skipped && !seen[p.OwnerReferences[0].Name] {
				rs := p.OwnerReferences[0].Name
				seen[rs] = true
				out = append(out, rs)
			}
		}
		return out
	}
	now := time.Now()
	// Each loop checks one group (the timeout allows one); the skipped ones
	// go first in the next loop, in their order.
	want := [][]string{{"rs-1", "rs-2"}, {"rs-2", "rs-0"}, {"rs-0", "rs-1"}}
	for loop, w := range want {
		res, err := runLoop(context.Background(), o, Input{Now: now.Add(time.Duration(loop) * time.Second), Pending: pods})
		if err != nil {
			t.Fatal(err)
		}
		if res.Skipped != 4 {
			t.Errorf("loop %d: skipped %d, want 4", loop+1, res.Skipped)
		}
		got := skippedSets()
		slices.Sort(got)
		w = slices.Clone(w)
		slices.Sort(w)
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("loop %d: ReplicaSets skipped (-want +got):\n%s", loop+1, diff)
		}
	}
}
