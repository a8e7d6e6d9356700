package awsfake

import (
	"fmt"
	"sort"
	"strconv"
	"time"
)

// failedLaunchRetry is how often a group whose launches fail records another
// failed scaling activity while it is still short of its desired capacity.
const failedLaunchRetry = 10 * time.Second

// reconcileLocked moves every group towards its desired capacity and every
// instance along its lifecycle. Callers hold s.mu.
func (s *Server) reconcileLocked() {
	now := s.now()
	s.reclaimEndedBlocksLocked(now) // reservations.go
	for _, name := range s.sortedGroupNames() {
		g := s.groups[name]
		kept := g.members[:0]
		for _, in := range g.members {
			s.advance(in, now)
			if in.Lifecycle != LifecycleTerminated {
				kept = append(kept, in)
			}
		}
		clear(g.members[len(kept):])
		g.members = kept
		s.reconcileGroup(g, now)
	}
}

// advance moves an instance to its next lifecycle state once the start
// delay has passed since its in-flight activity began, and completes that
// activity.
func (s *Server) advance(in *Instance, now time.Time) {
	a := s.inFlight[in.ID]
	if a == nil || now.Sub(a.Start) < s.startDelay {
		return
	}
	switch in.Lifecycle {
	case LifecyclePending:
		in.Lifecycle = LifecycleInService
	case LifecycleTerminating:
		in.Lifecycle = LifecycleTerminated
	default:
		return
	}
	a.StatusCode, a.Progress, a.End = statusSuccessful, 100, now
	delete(s.inFlight, in.ID)
}

// active returns the group's Pending and InService instances, in launch
// order.
func (s *Server) active(g *groupState) []*Instance {
	var out []*Instance
	for _, in := range g.members {
		if in.Lifecycle == LifecyclePending || in.Lifecycle == LifecycleInService {
			out = append(out, in)
		}
	}
	return out
}

// reconcileGroup launches or terminates instances of one group until it has
// Desired active ones (or records a failed launch).
func (s *Server) reconcileGroup(g *groupState, now time.Time) {
	act := s.active(g)
	switch {
	case len(act) < g.Desired:
		instanceType, failure := s.launchSpec(g)
		if failure != nil {
			if g.lastFail.IsZero() || now.Sub(g.lastFail) >= failedLaunchRetry {
				g.lastFail = now
				s.recordFailedLaunch(g, failure, len(act), now)
			}
			return
		}
		lt, lc := s.launchOrigin(g)
		s.launchInto(g, instanceType, lt, lc, now, len(act)) // reservations.go
	case len(act) > g.Desired:
		for _, in := range scaleInVictims(act, len(act)-g.Desired, g.TerminationPolicies) {
			s.startTermination(in, g, now, fmt.Sprintf(
				"At %s an instance was taken out of service in response to a difference between desired and actual capacity, shrinking the capacity from %d to %d.",
				awsTime(now), len(act), g.Desired))
		}
	}
}

// launch starts one instance of the group.
func (s *Server) launch(g *groupState, instanceType string, lt LaunchTemplateSpec, lc string, now time.Time, from int) *Instance {
	zone, _ := s.nextZone(g)
	in := &Instance{
		ID:           "i-" + randomHex(17),
		Group:        g.Name,
		Zone:         zone,
		InstanceType: instanceType,
		Lifecycle:    LifecyclePending,
		Launched:     now,

		LaunchTemplate:          lt,
		LaunchConfigurationName: lc,

		ProtectedFromScaleIn: g.NewInstancesProtectedFromScaleIn,
		Spot:                 s.launchesSpotLocked(g, lt), // spotprice.go
	}
	s.instances = append(s.instances, in)
	s.byID[in.ID] = in
	g.members = append(g.members, in)
	a := &activity{
		ID:          newRequestID(),
		Group:       g.Name,
		Description: "Launching a new EC2 instance: " + in.ID,
		Cause: fmt.Sprintf("At %s an instance was started in response to a difference between desired and actual capacity, increasing the capacity from %d to %d.",
			awsTime(now), from, g.Desired),
		Start:      now,
		StatusCode: statusInProgress,
		Progress:   50,
	}
	s.activities = append(s.activities, a)
	s.inFlight[in.ID] = a
	s.advance(in, now)
	return in
}

// recordFailedLaunch records a failed launch attempt of the group.
func (s *Server) recordFailedLaunch(g *groupState, f *launchFailure, have int, now time.Time) {
	zone, subnet := s.nextZone(g)
	msg := f.statusMessage()
	s.activities = append(s.activities, &activity{
		ID:          newRequestID(),
		Group:       g.Name,
		Description: fmt.Sprintf("Launching a new EC2 instance.  Status Reason: %s", msg),
		Cause: fmt.Sprintf("At %s an instance was started in response to a difference between desired and actual capacity, increasing the capacity from %d to %d.",
			awsTime(now), have, g.Desired),
		Start:      now,
		End:        now,
		StatusCode: statusFailed,
		StatusMsg:  msg,
		Progress:   100,
		Details:    fmt.Sprintf(`{"Subnet ID":%q,"Availability Zone":%q}`, subnet, zone),
	})
}

// startTermination moves an instance to Terminating with an activity.
func (s *Server) startTermination(in *Instance, g *groupState, now time.Time, cause string) *activity {
	in.Lifecycle = LifecycleTerminating
	a := &activity{
		ID:          newRequestID(),
		Group:       g.Name,
		Description: "Terminating EC2 instance: " + in.ID,
		Cause:       cause,
		Start:       now,
		StatusCode:  statusInProgress,
		Progress:    50,
	}
	s.activities = append(s.activities, a)
	s.inFlight[in.ID] = a
	s.advance(in, now)
	return a
}

// nextZone returns the zone and subnet of the group's next launch,
// round-robin over its subnets.
func (s *Server) nextZone(g *groupState) (zone, subnet string) {
	if len(g.Subnets) == 0 {
		return s.region + "a", ""
	}
	subnet = g.Subnets[g.nextZone%len(g.Subnets)]
	g.nextZone++
	zone, ok := s.subnets[subnet]
	if !ok {
		zone = s.region + "a"
	}
	return zone, subnet
}

// launchSpec is the instance type a group launches: the first override of a
// mixed-instances policy, else its launch template version's, else its
// launch configuration's. A FailLaunches setting, or a launch template,
// version or launch configuration that does not exist, is a failure.
func (s *Server) launchSpec(g *groupState) (string, *launchFailure) {
	if g.failure != nil {
		return "", g.failure
	}
	switch {
	case g.MixedInstances != nil:
		t, f := s.templateInstanceType(g.MixedInstances.LaunchTemplate)
		if f == nil && g.MixedInstances.Requirements != nil {
			return s.requirementsLaunchType(g, s.templateImage(g.MixedInstances.LaunchTemplate))
		}
		if f == nil && len(g.MixedInstances.Overrides) > 0 {
			return g.MixedInstances.Overrides[0], nil
		}
		return t, f
	case g.LaunchTemplate != nil:
		return s.templateInstanceType(*g.LaunchTemplate)
	case g.LaunchConfigurationName != "":
		lc, ok := s.launchConfigs[g.LaunchConfigurationName]
		if !ok {
			return "", &launchFailure{code: "ValidationError", message: "Launch configuration name not found - " + g.LaunchConfigurationName}
		}
		return lc.InstanceType, nil
	default:
		return "", &launchFailure{code: "ValidationError", message: "the group has no launch template, launch configuration or mixed instances policy"}
	}
}

// launchOrigin is what a launch of the group uses, as its instances
// remember it: the launch template (of the mixed-instances policy, or the
// group's) with $Default or $Latest resolved to the version number, else
// the launch configuration. Called once launchSpec found it launchable.
func (s *Server) launchOrigin(g *groupState) (LaunchTemplateSpec, string) {
	spec := g.LaunchTemplate
	if g.MixedInstances != nil {
		spec = &g.MixedInstances.LaunchTemplate
	}
	if spec == nil {
		return LaunchTemplateSpec{}, g.LaunchConfigurationName
	}
	lt := s.findTemplate(spec.ID, spec.Name)
	if lt == nil {
		return LaunchTemplateSpec{}, ""
	}
	v, ok := resolveVersion(lt, spec.Version)
	if !ok {
		return LaunchTemplateSpec{}, ""
	}
	return LaunchTemplateSpec{ID: lt.ID, Name: lt.Name, Version: strconv.FormatInt(v.Number, 10)}, ""
}

// templateInstanceType resolves a launch template spec to its version's
// instance type, or the EC2 error of a launch with it.
func (s *Server) templateInstanceType(spec LaunchTemplateSpec) (string, *launchFailure) {
	lt := s.findTemplate(spec.ID, spec.Name)
	switch {
	case lt == nil && spec.ID != "":
		return "", &launchFailure{code: "InvalidLaunchTemplateId.NotFound",
			message: fmt.Sprintf("The specified launch template, with template ID %s, does not exist", spec.ID)}
	case lt == nil:
		return "", &launchFailure{code: "InvalidLaunchTemplateName.NotFoundException",
			message: fmt.Sprintf("The specified launch template, with template name %s, does not exist", spec.Name)}
	}
	v, ok := resolveVersion(lt, spec.Version)
	if !ok {
		return "", &launchFailure{code: "InvalidLaunchTemplateId.VersionNotFound",
			message: fmt.Sprintf("Could not find launch template version %s for launch template ID %s", spec.Version, lt.ID)}
	}
	return v.InstanceType, nil
}

// findTemplate finds a launch template by ID, else by name.
func (s *Server) findTemplate(id, name string) *LaunchTemplate {
	if id != "" {
		return s.templates[id]
	}
	for _, lt := range s.templates {
		if lt.Name == name && name != "" {
			return lt
		}
	}
	return nil
}

// resolveVersion resolves "$Default" (also ""), "$Latest" or a number.
func resolveVersion(lt *LaunchTemplate, version string) (LaunchTemplateVersion, bool) {
	var want int64
	switch version {
	case "", "$Default":
		want = defaultVersion(lt)
	case "$Latest":
		want = latestVersion(lt)
	default:
		n, err := strconv.ParseInt(version, 10, 64)
		if err != nil {
			return LaunchTemplateVersion{}, false
		}
		want = n
	}
	for _, v := range lt.Versions {
		if v.Number == want {
			return v, true
		}
	}
	return LaunchTemplateVersion{}, false
}

// defaultVersion is the template's default version (the first when unset).
func defaultVersion(lt *LaunchTemplate) int64 {
	if lt.DefaultVersion != 0 || len(lt.Versions) == 0 {
		return lt.DefaultVersion
	}
	return sortedVersions(lt)[0].Number
}

// latestVersion is the template's highest version number.
func latestVersion(lt *LaunchTemplate) int64 {
	vs := sortedVersions(lt)
	if len(vs) == 0 {
		return 0
	}
	return vs[len(vs)-1].Number
}

// sortedVersions returns the template's versions by number.
func sortedVersions(lt *LaunchTemplate) []LaunchTemplateVersion {
	vs := append([]LaunchTemplateVersion(nil), lt.Versions...)
	sort.Slice(vs, func(i, j int) bool { return vs[i].Number < vs[j].Number })
	return vs
}

// awsTime formats a time as AWS does in activity causes.
func awsTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }
