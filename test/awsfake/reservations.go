package awsfake

import (
	"fmt"
	"net/url"
	"sort"
	"time"
)

// CapacityReservation is an EC2 On-Demand Capacity Reservation (ODCR) or,
// with ReservationType "capacity-block", a Capacity Block for ML: room for
// TotalInstanceCount instances of InstanceType in AvailabilityZone.
type CapacityReservation struct {
	// ID is "cr-" and 17 hex digits; generated when empty.
	ID               string
	InstanceType     string
	AvailabilityZone string
	// TotalInstanceCount is the reservation's size; its instances (those
	// launched into it and not Terminated yet) use it up, the rest is its
	// AvailableInstanceCount.
	TotalInstanceCount int
	// ReservationType is "default" (also when empty: an ODCR) or
	// "capacity-block".
	ReservationType string
	// StartDate and EndDate bound when it can be used (zero: from now on,
	// for ever; a Capacity Block always has both). State is reckoned from
	// them: "scheduled" before a block's start, "expired" from the end on,
	// else State as set ("" reads "active"; "cancelled" is never usable).
	StartDate, EndDate time.Time
	State              string
	// InstanceMatchCriteria is "open" (also when empty: launches whose
	// type and zone match use it without naming it) or "targeted" (only
	// launches that name it, or a resource group holding it).
	InstanceMatchCriteria string
	// ResourceGroupARN is the Capacity Reservation resource group it
	// belongs to ("" for none).
	ResourceGroupARN string

	// reclaimed are the instances terminated at a Capacity Block's end
	// (reclaimEndedBlocksLocked).
	reclaimed []string
}

// CapacityReservationSpec is a launch template version's
// CapacityReservationSpecification.
type CapacityReservationSpec struct {
	// Preference is "open" (also when empty), "none" or
	// "capacity-reservations-only".
	Preference string
	// TargetID or TargetResourceGroupARN is its CapacityReservationTarget.
	TargetID, TargetResourceGroupARN string
}

// AddCapacityReservation adds a reservation and returns its ID.
func (s *Server) AddCapacityReservation(r CapacityReservation) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.ID == "" {
		r.ID = "cr-" + randomHex(17)
	}
	if r.ReservationType == "" {
		r.ReservationType = "default"
	}
	if r.InstanceMatchCriteria == "" {
		r.InstanceMatchCriteria = "open"
	}
	if s.reservations == nil {
		s.reservations = map[string]*CapacityReservation{}
	}
	s.reservations[r.ID] = &r
	return r.ID
}

// ExtendCapacityReservation moves a reservation's EndDate to end, as an
// extension of a Capacity Block does (the block is then used, and reclaimed,
// until the new end); false when there is no such reservation.
func (s *Server) ExtendCapacityReservation(id string, end time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reservations[id]
	if r == nil {
		return false
	}
	r.EndDate = end
	return true
}

// ReservationUsage returns how many instances of the reservation are
// launched into it and not Terminated, and how many more it has room for.
func (s *Server) ReservationUsage(id string) (used, available int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reservations[id]
	if r == nil {
		return 0, 0
	}
	used = s.reservationUsedLocked(id)
	return used, max(r.TotalInstanceCount-used, 0)
}

func (s *Server) reservationUsedLocked(id string) int {
	n := 0
	for _, in := range s.instances {
		if in.CapacityReservationID == id && in.Lifecycle != LifecycleTerminated {
			n++
		}
	}
	return n
}

// stateAt is the reservation's state at now.
func (r *CapacityReservation) stateAt(now time.Time) string {
	switch {
	case !r.EndDate.IsZero() && !now.Before(r.EndDate):
		return "expired"
	case !r.StartDate.IsZero() && now.Before(r.StartDate):
		return "scheduled"
	case r.State != "":
		return r.State
	}
	return "active"
}

// launchInto launches the instances a group is short of (have active of
// its desired capacity), each into the Capacity Reservation its launch
// template version asks for (pickReservation). The first launch that
// cannot happen - the reservation full, not active, of another type -
// stops the launches: a Failed scaling activity (at most every
// failedLaunchRetry), as for any failed launch; the desired capacity stays.
func (s *Server) launchInto(g *groupState, instanceType string, lt LaunchTemplateSpec, lc string, now time.Time, have int) {
	version, _ := s.templateVersion(lt)
	for range g.Desired - have {
		r, failure := s.pickReservation(g, version, instanceType, now)
		if failure != nil {
			if g.lastFail.IsZero() || now.Sub(g.lastFail) >= failedLaunchRetry {
				g.lastFail = now
				s.recordFailedLaunch(g, failure, len(s.active(g)), now)
			}
			return
		}
		in := s.launch(g, instanceType, lt, lc, now, have)
		if r != nil {
			in.CapacityReservationID, in.Zone = r.ID, r.AvailabilityZone
		}
	}
}

// templateVersion is the version a launch uses (lt as launchOrigin
// resolved it); false for a launch configuration.
func (s *Server) templateVersion(lt LaunchTemplateSpec) (LaunchTemplateVersion, bool) {
	if lt.ID == "" {
		return LaunchTemplateVersion{}, false
	}
	t := s.findTemplate(lt.ID, "")
	if t == nil {
		return LaunchTemplateVersion{}, false
	}
	return resolveVersion(t, lt.Version)
}

// pickReservation is the reservation one launch of the version goes into
// (nil: plain On-Demand capacity), or why it cannot launch:
//   - a target (a reservation ID, or a resource group: its first active
//     member of the type with room) or a Capacity Block market type: that
//     reservation only; full, it fails with ReservationCapacityExceeded;
//   - preference capacity-reservations-only without a target: an active
//     open reservation of the type in one of the group's zones, else the
//     same failure;
//   - preference open (the default, also without a specification): such a
//     reservation when one has room, else On-Demand; none: On-Demand.
//
// The codes are EC2's; the messages are the fake's wording.
func (s *Server) pickReservation(g *groupState, v LaunchTemplateVersion, instanceType string, now time.Time) (*CapacityReservation, *launchFailure) {
	spec := CapacityReservationSpec{}
	if v.CapacityReservation != nil {
		spec = *v.CapacityReservation
	}
	full := func(what string) *launchFailure {
		return &launchFailure{code: "ReservationCapacityExceeded", form: Plain,
			message: fmt.Sprintf("Insufficient capacity in the Capacity Reservation %s for instance type %s", what, instanceType)}
	}
	switch {
	case spec.TargetID != "":
		r := s.reservations[spec.TargetID]
		if r == nil {
			return nil, &launchFailure{code: "InvalidCapacityReservationId.NotFound", form: Plain,
				message: fmt.Sprintf("The capacity reservation ID '%s' does not exist", spec.TargetID)}
		}
		if st := r.stateAt(now); st != "active" {
			return nil, &launchFailure{code: "IncorrectState", form: Plain,
				message: fmt.Sprintf("The Capacity Reservation %s is in state %s and cannot be launched into", r.ID, st)}
		}
		if r.InstanceType != instanceType {
			return nil, &launchFailure{code: "InvalidParameterCombination", form: Plain,
				message: fmt.Sprintf("The instance type %s does not match the instance type %s of the Capacity Reservation %s", instanceType, r.InstanceType, r.ID)}
		}
		if v.MarketType == "capacity-block" && r.ReservationType != "capacity-block" {
			return nil, &launchFailure{code: "InvalidParameterCombination", form: Plain,
				message: fmt.Sprintf("The market type capacity-block needs a Capacity Block; %s is not one", r.ID)}
		}
		if r.TotalInstanceCount-s.reservationUsedLocked(r.ID) <= 0 {
			return nil, full(r.ID)
		}
		return r, nil
	case spec.TargetResourceGroupARN != "":
		if r := s.firstWithRoom(now, instanceType, func(r *CapacityReservation) bool { return r.ResourceGroupARN == spec.TargetResourceGroupARN }); r != nil {
			return r, nil
		}
		return nil, full("group " + spec.TargetResourceGroupARN)
	case v.MarketType == "capacity-block":
		return nil, &launchFailure{code: "InvalidParameterCombination", form: Plain,
			message: "The market type capacity-block needs a Capacity Reservation target"}
	case spec.Preference == "none":
		return nil, nil
	}
	zones := map[string]bool{}
	for _, sub := range g.Subnets {
		zones[s.subnets[sub]] = true
	}
	r := s.firstWithRoom(now, instanceType, func(r *CapacityReservation) bool {
		return r.InstanceMatchCriteria == "open" && r.ReservationType == "default" && zones[r.AvailabilityZone]
	})
	if r == nil && spec.Preference == "capacity-reservations-only" {
		return nil, full("(any open one)")
	}
	return r, nil
}

// firstWithRoom is the first reservation (by ID) that is active at now,
// of the instance type, with room, for which match holds.
func (s *Server) firstWithRoom(now time.Time, instanceType string, match func(*CapacityReservation) bool) *CapacityReservation {
	ids := make([]string, 0, len(s.reservations))
	for id := range s.reservations {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r := s.reservations[id]
		if match(r) && r.InstanceType == instanceType && r.stateAt(now) == "active" && r.TotalInstanceCount-s.reservationUsedLocked(id) > 0 {
			return r
		}
	}
	return nil
}

type xmlCapacityReservation struct {
	CapacityReservationID  string `xml:"capacityReservationId"`
	OwnerID                string `xml:"ownerId"`
	CapacityReservationArn string `xml:"capacityReservationArn"`
	AvailabilityZone       string `xml:"availabilityZone"`
	InstanceType           string `xml:"instanceType"`
	InstancePlatform       string `xml:"instancePlatform"`
	Tenancy                string `xml:"tenancy"`
	TotalInstanceCount     int    `xml:"totalInstanceCount"`
	AvailableInstanceCount int    `xml:"availableInstanceCount"`
	State                  string `xml:"state"`
	StartDate              string `xml:"startDate,omitempty"`
	EndDate                string `xml:"endDate,omitempty"`
	EndDateType            string `xml:"endDateType"`
	InstanceMatchCriteria  string `xml:"instanceMatchCriteria"`
	ReservationType        string `xml:"reservationType"`
	CreateDate             string `xml:"createDate"`
}

// describeCapacityReservations answers DescribeCapacityReservations: the
// reservations CapacityReservationId.N names (an unknown one fails the
// call with InvalidCapacityReservationId.NotFound), or all of them, by ID,
// MaxResults (1-1000) a page; filters are refused.
func (s *Server) describeCapacityReservations(form url.Values) (any, *apiError) {
	if aerr := noFilters(form); aerr != nil {
		return nil, aerr
	}
	limit, aerr := intParam(form, "MaxResults", 1000, 1, 1000, func(f string, a ...any) *apiError {
		return ec2Error("InvalidParameterValue", f, a...)
	})
	if aerr != nil {
		return nil, aerr
	}
	ids := listParam(form, "CapacityReservationId")
	s.mu.Lock()
	defer s.mu.Unlock()
	set := map[string]bool{}
	for _, id := range ids {
		if s.reservations[id] == nil {
			return nil, ec2Error("InvalidCapacityReservationId.NotFound", "The capacity reservation ID '%s' does not exist", id)
		}
		set[id] = true
	}
	if len(ids) == 0 {
		for id := range s.reservations {
			set[id] = true
		}
	}
	keys := make([]string, 0, len(set))
	for id := range set {
		keys = append(keys, id)
	}
	sort.Strings(keys)
	page, next, aerr := paginate(keys, form.Get("NextToken"), limit, "InvalidParameterValue")
	if aerr != nil {
		return nil, aerr
	}
	out := struct {
		Reservations []xmlCapacityReservation `xml:"capacityReservationSet>item"`
		NextToken    string                   `xml:"nextToken,omitempty"`
	}{NextToken: next}
	now := s.now()
	for _, id := range page {
		r := s.reservations[id]
		x := xmlCapacityReservation{CapacityReservationID: r.ID, OwnerID: accountID,
			CapacityReservationArn: "arn:aws:ec2:" + s.region + ":" + accountID + ":capacity-reservation/" + r.ID,
			AvailabilityZone:       r.AvailabilityZone, InstanceType: r.InstanceType, InstancePlatform: "Linux/UNIX", Tenancy: "default",
			TotalInstanceCount: r.TotalInstanceCount, AvailableInstanceCount: max(r.TotalInstanceCount-s.reservationUsedLocked(id), 0),
			State: r.stateAt(now), EndDateType: "unlimited", InstanceMatchCriteria: r.InstanceMatchCriteria, ReservationType: r.ReservationType,
			CreateDate: time.Unix(0, 0).UTC().Format(ec2TimeFormat)}
		if !r.StartDate.IsZero() {
			x.StartDate = r.StartDate.UTC().Format(ec2TimeFormat)
		}
		if !r.EndDate.IsZero() {
			x.EndDate, x.EndDateType = r.EndDate.UTC().Format(ec2TimeFormat), "limited"
		}
		out.Reservations = append(out.Reservations, x)
	}
	return out, nil
}

// xmlCapacityReservationSpec is a launch template version's
// capacityReservationSpecification.
type xmlCapacityReservationSpec struct {
	Preference string `xml:"capacityReservationPreference,omitempty"`
	Target     *struct {
		ID               string `xml:"capacityReservationId,omitempty"`
		ResourceGroupArn string `xml:"capacityReservationResourceGroupArn,omitempty"`
	} `xml:"capacityReservationTarget,omitempty"`
}

func renderReservationSpec(spec *CapacityReservationSpec) *xmlCapacityReservationSpec {
	if spec == nil {
		return nil
	}
	x := &xmlCapacityReservationSpec{Preference: spec.Preference}
	if spec.TargetID != "" || spec.TargetResourceGroupARN != "" {
		x.Target = &struct {
			ID               string `xml:"capacityReservationId,omitempty"`
			ResourceGroupArn string `xml:"capacityReservationResourceGroupArn,omitempty"`
		}{spec.TargetID, spec.TargetResourceGroupARN}
	}
	return x
}

// reclaimEndedBlocksLocked terminates, as EC2 does at a Capacity Block's
// end, the instances still running in a block that has ended (its
// EndDate passed): the group's desired capacity stays, so the group tries
// to launch again (and fails: the block is expired). Callers hold s.mu.
func (s *Server) reclaimEndedBlocksLocked(now time.Time) {
	ended := map[string]*CapacityReservation{}
	for id, r := range s.reservations {
		if r.ReservationType == "capacity-block" && !r.EndDate.IsZero() && !now.Before(r.EndDate) {
			ended[id] = r
		}
	}
	if len(ended) == 0 {
		return
	}
	for _, name := range s.sortedGroupNames() {
		g := s.groups[name]
		for _, in := range g.members {
			r := ended[in.CapacityReservationID]
			if r == nil || (in.Lifecycle != LifecyclePending && in.Lifecycle != LifecycleInService) {
				continue
			}
			s.startTermination(in, g, now, fmt.Sprintf("At %s instance %s was taken out of service: Capacity Block %s ended at %s.",
				awsTime(now), in.ID, r.ID, awsTime(r.EndDate)))
			r.reclaimed = append(r.reclaimed, in.ID)
		}
	}
}

// ReclaimedAtBlockEnd returns the instances the fake terminated because
// Capacity Block id ended while they ran (none when they were gone by then).
func (s *Server) ReclaimedAtBlockEnd(id string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reconcileLocked()
	if r := s.reservations[id]; r != nil {
		return append([]string(nil), r.reclaimed...)
	}
	return nil
}
