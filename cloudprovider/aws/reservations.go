package aws

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// Reserved capacity. A group whose launch template version names a
// Capacity Reservation in its CapacityReservationTarget (an On-Demand
// Capacity Reservation, or a Capacity Block for ML with the market type
// capacity-block) launches into that reservation only: EC2 fails a launch
// beyond its room. The provider reads such reservations with
// DescribeCapacityReservations (their type, state, end, instances left)
// and:
//   - bounds the group's MaxSize to its desired capacity plus the
//     instances left in the reservation (less the capacity the groups
//     targeting it asked for and AWS has not launched since the read), so a
//     scale-up never asks for a launch beyond the reservation; a
//     reservation not active (a Capacity Block before its start or from its
//     end on, an expired or cancelled one) has none left;
//   - labels the group's template node with ReservationIDLabel,
//     ReservationTypeLabel and, for a Capacity Block, ReservationEndLabel,
//     and with the capacity type "reserved" (CapacityTypeLabel; EKS's
//     label CAPACITY_BLOCK for a block);
//   - tells the price expander how many of its next nodes are already paid
//     for (NodeGroup.ReservedNodesLeft): they cost nothing there.
//
// A target that is a Capacity Reservation resource group, and the
// preferences open and capacity-reservations-only without a target (which
// use any matching open reservation), name no reservation: such groups are
// treated as ordinary On-Demand groups.
//
// The reservations are read in the Refresh that first sees a group naming
// them, again in any Refresh that read a group naming them changed, and at
// least every list interval; one call per 100 reservations. A failed read
// (IAM may not allow it) keeps what was read before and is tried again
// after reservationRetry.
const (
	ReservationIDLabel   = cloudprovider.CapacityReservationIDLabel
	ReservationTypeLabel = "cluster-autoscaler.kubernetes.io/capacity-reservation-type"
	// ReservationEndLabel is a Capacity Block's end, in Unix seconds.
	ReservationEndLabel = "cluster-autoscaler.kubernetes.io/capacity-reservation-end"
)

// capacityReserved is the CapacityTypeLabel value of reserved capacity
// (Karpenter's value); eksCapacityBlock EKS's value for a Capacity Block.
const (
	capacityReserved = "reserved"
	eksCapacityBlock = "CAPACITY_BLOCK"
)

// reservationRetry is how long after a failed DescribeCapacityReservations
// it is not called again.
const reservationRetry = 5 * time.Minute

// reservationBatch is how many IDs one DescribeCapacityReservations names.
const reservationBatch = 100

// capacityReservationsAPI is the EC2 call that describes Capacity
// Reservations (the SDK's EC2 client has it; a test double may not).
type capacityReservationsAPI interface {
	DescribeCapacityReservations(ctx context.Context, in *ec2.DescribeCapacityReservationsInput, opts ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error)
}

// reservationTarget is what a launch template version says of reserved
// capacity.
type reservationTarget struct {
	// ID is the Capacity Reservation it targets ("" for none).
	ID string
	// Block: the market type is capacity-block.
	Block bool
}

// reservation is a Capacity Reservation as last read.
type reservation struct {
	ID, Type, State string
	Available       int
	End             time.Time
	// live is, by group naming it, the group's instances when it was read.
	live map[string]int
}

// reservationBook keeps the templates' targets and the reservations read.
type reservationBook struct {
	mu      sync.Mutex
	targets map[string]reservationTarget // launchTemplateRef.String() -> target
	byID    map[string]*reservation
	readAt  time.Time
	// failedAt is when the last read failed (zero: it did not).
	failedAt time.Time
}

func newReservationBook() *reservationBook {
	return &reservationBook{targets: map[string]reservationTarget{}, byID: map[string]*reservation{}}
}

func (p *Provider) reservations() *reservationBook { return p.reserved }

// noteLaunchReservation records what a launch template version says of
// reserved capacity (facts.go reads it with the version's instance type).
func (p *Provider) noteLaunchReservation(ref launchTemplateRef, data *ec2types.ResponseLaunchTemplateData) {
	if data == nil {
		return
	}
	var t reservationTarget
	if s := data.CapacityReservationSpecification; s != nil && s.CapacityReservationTarget != nil {
		t.ID = aws.ToString(s.CapacityReservationTarget.CapacityReservationId)
	}
	if mo := data.InstanceMarketOptions; mo != nil && mo.MarketType == ec2types.MarketTypeCapacityBlock {
		t.Block = true
	}
	b := p.reservations()
	b.mu.Lock()
	b.targets[ref.String()] = t
	b.mu.Unlock()
}

// groupTarget is the reservation a group's launch template names, as last
// read; the version is read now when it never was (once per template
// version; the template's instance type is cached with it, facts.go).
func (p *Provider) groupTarget(ctx context.Context, d *groupDesc) (reservationTarget, bool) {
	if d.LaunchTemplate == nil {
		return reservationTarget{}, false
	}
	b := p.reservations()
	key := d.LaunchTemplate.String()
	b.mu.Lock()
	t, ok := b.targets[key]
	b.mu.Unlock()
	if !ok {
		if _, err := p.launchInstanceType(ctx, d); err != nil {
			klog.FromContext(ctx).V(4).Info("Could not read the launch template for its Capacity Reservation target", "nodeGroup", d.Name, "err", err)
		}
		b.mu.Lock()
		t, ok = b.targets[key]
		b.mu.Unlock()
	}
	return t, ok && t.ID != ""
}

// readReservations reads the reservations the cached groups name when due
// (see above). Called by Refresh, under refreshMu, after the groups' reads
// were merged at now.
func (p *Provider) readReservations(ctx context.Context, now time.Time) {
	targets := map[string][]string{} // reservation -> groups
	changed := false
	for _, n := range p.cachedNames() {
		c := p.cache[n]
		t, ok := p.groupTarget(ctx, &c.desc)
		if !ok {
			continue
		}
		targets[t.ID] = append(targets[t.ID], n)
		changed = changed || c.changedAt.Equal(now)
	}
	if len(targets) == 0 {
		return
	}
	api, ok := p.ec2.(capacityReservationsAPI)
	if !ok {
		return
	}
	b := p.reservations()
	b.mu.Lock()
	due := changed || now.Sub(b.readAt) >= p.listEvery
	for id := range targets {
		due = due || b.byID[id] == nil
	}
	failedAt := b.failedAt
	b.mu.Unlock()
	if !due || (!failedAt.IsZero() && now.Sub(failedAt) < reservationRetry) {
		return
	}
	ids := make([]string, 0, len(targets))
	for id := range targets {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	read, err := describeReservations(ctx, api, ids)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		b.failedAt = now
		klog.FromContext(ctx).Error(err, "Reading the Capacity Reservations the launch templates name; keeping what was read before", "reservations", len(ids),
			"retryIn", reservationRetry)
		return
	}
	b.failedAt, b.readAt = time.Time{}, now
	b.byID = map[string]*reservation{}
	for _, r := range read {
		r.live = map[string]int{}
		for _, n := range targets[r.ID] {
			r.live[n] = p.cache[n].desc.live()
		}
		b.byID[r.ID] = r
	}
	klog.FromContext(ctx).V(4).Info("Read the Capacity Reservations the launch templates name", "reservations", len(read))
}

// describeReservations reads the reservations, reservationBatch per call.
func describeReservations(ctx context.Context, api capacityReservationsAPI, ids []string) ([]*reservation, error) {
	var out []*reservation
	for start := 0; start < len(ids); start += reservationBatch {
		batch := ids[start:min(start+reservationBatch, len(ids))]
		page, err := api.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: batch})
		if err != nil {
			return nil, callError(fmt.Sprintf("describing %d Capacity Reservations", len(batch)), err, true)
		}
		for _, cr := range page.CapacityReservations {
			typ := string(cr.ReservationType)
			if typ == "" {
				typ = string(ec2types.CapacityReservationTypeDefault)
			}
			out = append(out, &reservation{ID: aws.ToString(cr.CapacityReservationId), Type: typ, State: string(cr.State),
				Available: int(aws.ToInt32(cr.AvailableInstanceCount)), End: aws.ToTime(cr.EndDate)})
		}
	}
	return out, nil
}

// groupReservation is what a group knows of the reservation it launches
// into: the reservation and the instances left in it for scale-ups.
type groupReservation struct {
	ID, Type string
	End      time.Time
	Left     int
}

// reservedGroups returns, by group, the reservation each cached group
// launches into, with the instances left: the reservation's available
// count when read, less what the groups naming it asked for since and AWS
// had not launched then (desired now less instances then); none when it
// is not active or has ended by now, nor for a Capacity Block in its drain
// window (blockend.go). Called under refreshMu.
func (p *Provider) reservedGroups(now time.Time) map[string]groupReservation {
	b := p.reservations()
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]groupReservation{}
	for _, r := range b.byID {
		left := r.Available
		for n, live := range r.live {
			if c := p.cache[n]; c != nil {
				left -= max(c.desc.Desired-live, 0)
			}
		}
		if r.State != string(ec2types.CapacityReservationStateActive) || (!r.End.IsZero() && !now.Before(r.End)) ||
			p.blockClosing(r.Type, r.End, now) {
			left = 0
		}
		for n := range r.live {
			out[n] = groupReservation{ID: r.ID, Type: r.Type, End: r.End, Left: max(left, 0)}
		}
	}
	return out
}

// reservedMax bounds a group's max by its reservation: its desired
// capacity plus the instances left.
func reservedMax(max, desired int, r *groupReservation) int {
	if r == nil {
		return max
	}
	return min(max, desired+r.Left)
}

// ReservedNodesLeft tells how many of the group's next nodes launch into
// reserved capacity already paid for (the price expander prices them at
// nothing); 0 for a group that names no reservation.
func (g *NodeGroup) ReservedNodesLeft() int {
	if g.reservation == nil {
		return 0
	}
	return g.reservation.Left
}

// reservationLabels labels a template node of a group launching into a
// reservation (keys the node-template tags set stay as they are).
func reservationLabels(node *apiv1.Node, r *groupReservation, tags map[string]string) {
	if r == nil {
		return
	}
	set := map[string]string{ReservationIDLabel: r.ID, ReservationTypeLabel: r.Type, CapacityTypeLabel: capacityReserved}
	if r.Type == string(ec2types.CapacityReservationTypeCapacityBlock) {
		set[EKSCapacityTypeLabel] = eksCapacityBlock
		if !r.End.IsZero() {
			set[ReservationEndLabel] = fmt.Sprint(r.End.Unix())
		}
	}
	for k, v := range set {
		if _, tagged := tags[LabelTagPrefix+k]; !tagged {
			node.Labels[k] = v
		}
	}
}
