package aws

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/test/awsfake"
)

// reservedFake is the fake with an ODCR of 3 m5.large (targeted), a
// Capacity Block of 2 ending in 10 hours, one that has not started, and
// launch templates naming each.
func reservedFake(t *testing.T) (s *awsfake.Server, odcr, block string, end time.Time) {
	t.Helper()
	s = startFake(t)
	now := time.Now().UTC().Truncate(time.Second)
	end = now.Add(10 * time.Hour)
	odcr = s.AddCapacityReservation(awsfake.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a",
		TotalInstanceCount: 3, InstanceMatchCriteria: "targeted"})
	block = s.AddCapacityReservation(awsfake.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1b",
		TotalInstanceCount: 2, ReservationType: "capacity-block", StartDate: now.Add(-time.Hour), EndDate: end, InstanceMatchCriteria: "targeted"})
	later := s.AddCapacityReservation(awsfake.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1b",
		TotalInstanceCount: 4, ReservationType: "capacity-block", StartDate: now.Add(time.Hour), EndDate: end, InstanceMatchCriteria: "targeted"})
	for name, v := range map[string]awsfake.LaunchTemplateVersion{
		"lt-odcr":  {Number: 1, InstanceType: "m5.large", CapacityReservation: &awsfake.CapacityReservationSpec{TargetID: odcr}},
		"lt-block": {Number: 1, InstanceType: "m5.large", MarketType: "capacity-block", CapacityReservation: &awsfake.CapacityReservationSpec{TargetID: block}},
		"lt-later": {Number: 1, InstanceType: "m5.large", MarketType: "capacity-block", CapacityReservation: &awsfake.CapacityReservationSpec{TargetID: later}},
	} {
		s.AddLaunchTemplate(awsfake.LaunchTemplate{ID: name, Name: name, Versions: []awsfake.LaunchTemplateVersion{v}})
	}
	for _, g := range []string{"odcr", "block", "later"} {
		s.AddGroup(awsfake.Group{Name: g, Max: 10, LaunchTemplate: &awsfake.LaunchTemplateSpec{ID: "lt-" + g}, Subnets: []string{"subnet-a", "subnet-b"}})
	}
	s.AddGroup(groupOf("plain", 0))
	return s, odcr, block, end
}

// reservedView is what a group tells of its reservation.
type reservedView struct {
	Max, Left int
	Labels    map[string]string
}

func viewOf(t *testing.T, p *Provider, name string) reservedView {
	t.Helper()
	g := group(t, p, name)
	info, err := g.TemplateNodeInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{}
	for _, k := range []string{ReservationIDLabel, ReservationTypeLabel, ReservationEndLabel, CapacityTypeLabel, EKSCapacityTypeLabel} {
		if v, ok := info.Node.Labels[k]; ok {
			labels[k] = v
		}
	}
	return reservedView{Max: g.MaxSize(), Left: g.ReservedNodesLeft(), Labels: labels}
}

// TestReservedGroups: a group whose launch template names a Capacity
// Reservation or Block is bounded by the instances left in it, says how
// many are left, and its template carries the reservation's labels; a
// block that has not started has none left; an ordinary group is as
// before.
func TestReservedGroups(t *testing.T) {
	s, odcr, block, end := reservedFake(t)
	p := newTestProvider(t, []string{"0:10:odcr", "0:10:block", "0:10:later", "0:10:plain"}, nil)
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[string]reservedView{}
	for _, n := range []string{"odcr", "block", "later", "plain"} {
		got[n] = viewOf(t, p, n)
	}
	want := map[string]reservedView{
		"odcr": {Max: 3, Left: 3, Labels: map[string]string{ReservationIDLabel: odcr, ReservationTypeLabel: "default",
			CapacityTypeLabel: "reserved", EKSCapacityTypeLabel: "ON_DEMAND"}},
		"block": {Max: 2, Left: 2, Labels: map[string]string{ReservationIDLabel: block, ReservationTypeLabel: "capacity-block",
			ReservationEndLabel: fmt.Sprint(end.Unix()), CapacityTypeLabel: "reserved", EKSCapacityTypeLabel: "CAPACITY_BLOCK"}},
		"later": {Max: 0, Left: 0},
		"plain": {Max: 10, Left: 0, Labels: map[string]string{CapacityTypeLabel: "on-demand", EKSCapacityTypeLabel: "ON_DEMAND"}},
	}
	for n, w := range want {
		if n == "later" {
			// Its labels are the block's; only its bound matters here.
			w.Labels = got[n].Labels
			want[n] = w
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("groups (-want +got):\n%s", d)
	}
	if calls := s.Calls()["DescribeCapacityReservations"]; calls != 1 {
		t.Errorf("%d DescribeCapacityReservations calls in the first Refresh, want 1 (for the three reservations)", calls)
	}
}

// TestReservedScaleUpStopsAtTheReservation: increases of a reserved group
// use up its reservation and no more: the bound follows what was asked
// before AWS launched it and what launched since; nothing launches beyond
// the reservation. Steady Refreshes read the reservations once a list
// interval only.
func TestReservedScaleUpStopsAtTheReservation(t *testing.T) {
	s, odcr, _, _ := reservedFake(t)
	p := newTestProvider(t, []string{"0:10:odcr", "0:10:plain"}, nil)
	ctx := context.Background()
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := group(t, p, "odcr").IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if g := group(t, p, "odcr"); g.MaxSize() != 3 || g.ReservedNodesLeft() != 1 {
		t.Errorf("after asking for 2: max %d, left %d; want 3, 1", g.MaxSize(), g.ReservedNodesLeft())
	}
	if err := group(t, p, "odcr").IncreaseSize(ctx, 2); err == nil {
		t.Error("an increase beyond the reservation was accepted")
	}
	if err := group(t, p, "odcr").IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	refreshUntil(t, p, "three instances", func() bool {
		running, _, _ := states(mustNodes(t, group(t, p, "odcr")))
		return running == 3
	})
	if g := group(t, p, "odcr"); g.MaxSize() != 3 || g.ReservedNodesLeft() != 0 {
		t.Errorf("reservation used up: max %d, left %d; want 3, 0", g.MaxSize(), g.ReservedNodesLeft())
	}
	if used, left := s.ReservationUsage(odcr); used != 3 || left != 0 {
		t.Errorf("fake's reservation: used %d, left %d; want 3, 0", used, left)
	}
	before := s.Calls()["DescribeCapacityReservations"]
	for range 5 {
		if err := p.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Calls()["DescribeCapacityReservations"] - before; n != 0 {
		t.Errorf("%d DescribeCapacityReservations calls in 5 steady Refreshes within the list interval, want 0", n)
	}
}

func mustNodes(t *testing.T, g *NodeGroup) []cloudprovider.Instance {
	t.Helper()
	ins, err := g.Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ins
}

// TestReservationLabelsYieldToTags: a node-template label tag wins over a
// reservation label.
func TestReservationLabelsYieldToTags(t *testing.T) {
	node := &apiv1.Node{}
	node.Labels = map[string]string{CapacityTypeLabel: "on-demand"}
	r := &groupReservation{ID: "cr-1", Type: "default", Left: 1}
	reservationLabels(node, r, map[string]string{LabelTagPrefix + CapacityTypeLabel: "on-demand"})
	want := map[string]string{CapacityTypeLabel: "on-demand", ReservationIDLabel: "cr-1", ReservationTypeLabel: "default"}
	if d := cmp.Diff(want, node.Labels); d != "" {
		t.Errorf("labels (-want +got):\n%s", d)
	}
}

// TestReservationReadRefused: when DescribeCapacityReservations is refused
// after a first read, the group is bounded by that read less what was
// asked since (not by the stale count alone), and the call is not tried
// again before reservationRetry.
func TestReservationReadRefused(t *testing.T) {
	s, _, _, _ := reservedFake(t)
	p := newTestProvider(t, []string{"0:10:odcr"}, nil)
	ctx := context.Background()
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	s.Deny("DescribeCapacityReservations")
	if err := group(t, p, "odcr").IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	refreshUntil(t, p, "two instances", func() bool {
		running, _, _ := states(mustNodes(t, group(t, p, "odcr")))
		return running == 2
	})
	if g := group(t, p, "odcr"); g.MaxSize() != 3 || g.ReservedNodesLeft() != 1 {
		t.Errorf("with the first read only: max %d, left %d; want 3, 1", g.MaxSize(), g.ReservedNodesLeft())
	}
	if n := s.Calls()["DescribeCapacityReservations"]; n != 2 {
		t.Errorf("%d DescribeCapacityReservations calls, want 2 (the first read, one refused, none again within %v)", n, reservationRetry)
	}
}
