package awsfake

import (
	"net/url"
	"sort"
	"strconv"
)

// maxProtectionIDs is how many instances one SetInstanceProtection call may
// name.
const maxProtectionIDs = 50

// setInstanceProtection answers SetInstanceProtection: every named instance
// must be an active member of the group, or nothing changes.
func (s *Server) setInstanceProtection(form url.Values) (any, *apiError) {
	name := form.Get("AutoScalingGroupName")
	ids := listParam(form, "InstanceIds.member")
	protect, err := strconv.ParseBool(form.Get("ProtectedFromScaleIn"))
	if err != nil {
		return nil, validationError("1 validation error detected: Value null at 'protectedFromScaleIn' failed to satisfy constraint: Member must not be null")
	}
	if len(ids) == 0 || len(ids) > maxProtectionIDs {
		return nil, validationError("1 validation error detected: Value at 'instanceIds' failed to satisfy constraint: "+
			"Member must have length less than or equal to %d and greater than or equal to 1", maxProtectionIDs)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reconcileLocked()
	if _, ok := s.groups[name]; !ok {
		return nil, validationError("AutoScalingGroup name not found - no such group: %s", name)
	}
	for _, id := range ids {
		in, ok := s.byID[id]
		if !ok || in.Group != name || in.Lifecycle == LifecycleTerminated {
			return nil, validationError("The instance %s is not part of Auto Scaling group %s.", id, name)
		}
		if in.Lifecycle == LifecycleTerminating {
			return nil, validationError("The instance %s is not in InService or Pending state.", id)
		}
	}
	for _, id := range ids {
		s.byID[id].ProtectedFromScaleIn = protect
	}
	s.reconcileLocked()
	return struct{}{}, nil
}

// terminationPolicies is what a group reports as its termination policies.
func terminationPolicies(p []string) []string {
	if len(p) == 0 {
		return []string{"Default"}
	}
	return append([]string(nil), p...)
}

// scaleInVictims picks up to n instances to terminate on scale-in, never a
// protected one: from the zone with the most unprotected instances, then by
// the group's first termination policy (OldestInstance: the oldest first;
// otherwise the newest first, Pending before InService).
func scaleInVictims(act []*Instance, n int, policies []string) []*Instance {
	oldest := len(policies) > 0 && policies[0] == "OldestInstance"
	var left []*Instance // in launch order for OldestInstance, else reversed
	for i := range act {
		in := act[i]
		if !oldest {
			in = act[len(act)-1-i]
		}
		if !in.ProtectedFromScaleIn {
			left = append(left, in)
		}
	}
	sort.SliceStable(left, func(i, j int) bool {
		if oldest {
			return left[i].Launched.Before(left[j].Launched)
		}
		return left[j].Launched.Before(left[i].Launched)
	})
	var out []*Instance
	for ; n > 0 && len(left) > 0; n-- {
		perZone := map[string]int{}
		for _, in := range left {
			perZone[in.Zone]++
		}
		best := 0
		for i, in := range left {
			if perZone[in.Zone] > perZone[left[best].Zone] {
				best = i
			}
		}
		out = append(out, left[best])
		left = append(left[:best], left[best+1:]...)
	}
	return out
}

// BeforeCall runs fn before the fake handles each later call of the action
// (after it is counted and found allowed, before any state is read), so a
// test can make the world change between a client's read and its write.
func (s *Server) BeforeCall(action string, fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.beforeCall == nil {
		s.beforeCall = map[string][]func(){}
	}
	s.beforeCall[action] = append(s.beforeCall[action], fn)
}

func (s *Server) runBeforeCall(action string) {
	s.mu.Lock()
	fns := append([]func(){}, s.beforeCall[action]...)
	s.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}
