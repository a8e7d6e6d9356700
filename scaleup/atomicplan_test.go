package scaleup

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/capacityquota"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

// TestAllAndSeveralLimits: the limits of one group in planAll's first pass
// (allLimits: each reason a group is left out, with its note) and in its
// fill of several groups (severalLimits: the cluster-wide limits stop the
// fill, a full CapacityQuota only skips the group).
func TestAllAndSeveralLimits(t *testing.T) {
	opts := DefaultOptions()
	opts.MaxNodesTotal = 10
	s := &Session{o: &Orchestrator{opts: opts}}
	p := fakeprovider.NewProvider()
	template := &cloudprovider.NodeInfo{Node: &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "t",
		Labels: map[string]string{"group": "g"}}}}
	group := func(target int, info *cloudprovider.NodeInfo, skip string) *groupState {
		return &groupState{group: p.AddNodeGroup("g", 0, 4, target, nil), target: target, template: info, skip: skip}
	}
	// quotaUsed: a CapacityQuota of 2 nodes that picks the group's nodes,
	// with used of them used.
	quotaUsed := func(used int64) func(t *testing.T) *totals {
		return func(t *testing.T) *totals {
			q := quota(t, "q2", map[string]string{"group": "g"}, map[string]string{string(capacityquota.NodesResource): "2"})
			return &totals{quotas: []quotaUse{{q: q, used: map[apiv1.ResourceName]int64{capacityquota.NodesResource: used * 1000}}}}
		}
	}
	type want struct {
		MaxNodes, Room   int
		AllNote, SevNote string
		SeveralStops     bool
		SeveralMaxNodes  int
	}
	for _, tc := range []struct {
		name   string
		gs     *groupState
		totals func(t *testing.T) *totals
		empty  bool
		want   want
		// notCandidate: the first pass leaves the group out whatever the
		// totals, so severalLimits never sees it.
		notCandidate bool
	}{
		{name: "room up to the max size", gs: group(1, template, ""), totals: func(*testing.T) *totals { return &totals{} },
			want: want{MaxNodes: 3, Room: 3, SeveralMaxNodes: 3}},
		{name: "empty: room from zero, skip ignored", gs: group(4, template, "backed off"), empty: true,
			totals: func(*testing.T) *totals { return &totals{} }, want: want{MaxNodes: 4, Room: 4, SeveralMaxNodes: 4}},
		{name: "left out", gs: group(1, template, "backed off"), totals: func(*testing.T) *totals { return &totals{} },
			want: want{AllNote: "group g is left out (backed off)"}, notCandidate: true},
		{name: "no template", gs: group(1, nil, ""), totals: func(*testing.T) *totals { return &totals{} },
			want: want{AllNote: "group g has no template node"}, notCandidate: true},
		{name: "at max size", gs: group(4, template, ""), totals: func(*testing.T) *totals { return &totals{} },
			want: want{AllNote: "group g is at its max size of 4 nodes"}, notCandidate: true},
		{name: "--max-nodes-total reached", gs: group(1, template, ""),
			totals: func(*testing.T) *totals { return &totals{nodes: 10} },
			want: want{AllNote: "group g: the cluster-wide limits leave room for no node",
				SevNote: "the cluster-wide limits leave room for no more nodes", SeveralStops: true}},
		{name: "CapacityQuota full", gs: group(1, template, ""), totals: quotaUsed(2),
			want: want{AllNote: "group g: CapacityQuota q2 leaves room for no node",
				SevNote: "group g: CapacityQuota q2 leaves room for no more nodes"}},
		{name: "CapacityQuota caps the nodes", gs: group(1, template, ""), totals: quotaUsed(1),
			want: want{MaxNodes: 1, Room: 3, SeveralMaxNodes: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got want
			limits, room, note := s.allLimits("g", tc.gs, tc.totals(t), tc.empty)
			got.MaxNodes, got.Room, got.AllNote = limits.MaxNodes, room, note
			if !tc.notCandidate {
				sl, sn, stop := s.severalLimits(tc.gs, tc.totals(t), tc.empty)
				got.SevNote, got.SeveralStops = sn, stop
				if sn == "" {
					got.SeveralMaxNodes = sl.MaxNodes
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("limits (-want +got):\n%s", diff)
			}
		})
	}
}
