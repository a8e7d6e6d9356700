package awsfake

import (
	"net/url"
	"sort"
)

// launchesSpotLocked tells whether the group's next instance is a Spot
// one: by the mixed-instances policy's distribution (the first
// OnDemandBaseCapacity instances On-Demand, then On-Demand while the
// On-Demand share of the instances above the base stays within
// OnDemandPercentageAboveBaseCapacity), else by the market type of the
// launch template version it is launched with.
func (s *Server) launchesSpotLocked(g *groupState, lt LaunchTemplateSpec) bool {
	if mi := g.MixedInstances; mi != nil {
		pct := 100
		if mi.OnDemandPercentageAboveBaseCapacity != nil {
			pct = *mi.OnDemandPercentageAboveBaseCapacity
		}
		onDemand := 0
		for _, m := range g.members {
			if !m.Spot {
				onDemand++
			}
		}
		if onDemand < mi.OnDemandBaseCapacity {
			return false
		}
		above := len(g.members) - mi.OnDemandBaseCapacity
		aboveOnDemand := onDemand - mi.OnDemandBaseCapacity
		return (aboveOnDemand+1)*100 > pct*(above+1)
	}
	if lt.ID == "" {
		return false
	}
	t := s.findTemplate(lt.ID, "")
	if t == nil {
		return false
	}
	v, ok := resolveVersion(t, lt.Version)
	return ok && v.MarketType == "spot"
}

type xmlReservation struct {
	ReservationID string        `xml:"reservationId"`
	OwnerID       string        `xml:"ownerId"`
	Instances     []xmlInstance `xml:"instancesSet>item"`
}

type xmlInstance struct {
	InstanceID   string `xml:"instanceId"`
	InstanceType string `xml:"instanceType"`
	Placement    struct {
		AvailabilityZone string `xml:"availabilityZone"`
	} `xml:"placement"`
	InstanceState struct {
		Code int    `xml:"code"`
		Name string `xml:"name"`
	} `xml:"instanceState"`
	// InstanceLifecycle is "spot" for a Spot instance, absent otherwise.
	InstanceLifecycle string `xml:"instanceLifecycle,omitempty"`
	LaunchTime        string `xml:"launchTime"`
}

// describeInstances answers DescribeInstances for the instances named by
// InstanceId.N (an unknown one fails the call with
// InvalidInstanceID.NotFound), or all of them, MaxResults (5-1000) a page;
// filters are refused. Each instance is a reservation of its own.
func (s *Server) describeInstances(form url.Values) (any, *apiError) {
	if aerr := noFilters(form); aerr != nil {
		return nil, aerr
	}
	ids := listParam(form, "InstanceId")
	limit := 1000
	if form.Get("MaxResults") != "" {
		if len(ids) > 0 {
			return nil, ec2Error("InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults")
		}
		var aerr *apiError
		if limit, aerr = intParam(form, "MaxResults", 1000, 5, 1000, func(f string, a ...any) *apiError {
			return ec2Error("InvalidParameterValue", f, a...)
		}); aerr != nil {
			return nil, aerr
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	if len(ids) > 0 {
		seen := map[string]bool{}
		for _, id := range ids {
			if s.byID[id] == nil {
				return nil, ec2Error("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
			}
			if !seen[id] {
				seen[id] = true
				keys = append(keys, id)
			}
		}
	} else {
		for id := range s.byID {
			keys = append(keys, id)
		}
	}
	sort.Strings(keys)
	page, next, aerr := paginate(keys, form.Get("NextToken"), limit, "InvalidParameterValue")
	if aerr != nil {
		return nil, aerr
	}
	out := struct {
		Reservations []xmlReservation `xml:"reservationSet>item"`
		NextToken    string           `xml:"nextToken,omitempty"`
	}{NextToken: next}
	for _, id := range page {
		in := s.byID[id]
		x := xmlInstance{InstanceID: in.ID, InstanceType: in.InstanceType, LaunchTime: in.Launched.UTC().Format(ec2TimeFormat)}
		x.Placement.AvailabilityZone = in.Zone
		x.InstanceState.Code, x.InstanceState.Name = ec2State(in.Lifecycle)
		if in.Spot {
			x.InstanceLifecycle = "spot"
		}
		out.Reservations = append(out.Reservations, xmlReservation{ReservationID: "r-" + in.ID[2:], OwnerID: accountID,
			Instances: []xmlInstance{x}})
	}
	return out, nil
}

// ec2State is the EC2 state (code and name) of an Auto Scaling lifecycle.
func ec2State(lifecycle string) (int, string) {
	switch lifecycle {
	case LifecyclePending:
		return 0, "pending"
	case LifecycleTerminating:
		return 32, "shutting-down"
	case LifecycleTerminated:
		return 48, "terminated"
	}
	return 16, "running"
}

// spotCount is how many of the group's live instances are Spot (tests).
func (s *Server) spotCount(group string) (spot, all int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.groups[group]; g != nil {
		for _, m := range g.members {
			all++
			if m.Spot {
				spot++
			}
		}
	}
	return spot, all
}
