package awsfake

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// accountID is the fake account that owns everything.
const accountID = "123456789012"

// asgTimeFormat is the timestamp format of Auto Scaling answers.
const asgTimeFormat = "2006-01-02T15:04:05.000Z"

type xmlLTSpec struct {
	LaunchTemplateID   string `xml:"LaunchTemplateId,omitempty"`
	LaunchTemplateName string `xml:",omitempty"`
	Version            string `xml:",omitempty"`
}

type xmlMixedInstancesPolicy struct {
	LaunchTemplate struct {
		LaunchTemplateSpecification xmlLTSpec
		Overrides                   []xmlOverride `xml:"Overrides>member"`
	}
	InstancesDistribution struct {
		OnDemandAllocationStrategy          string
		OnDemandBaseCapacity                int
		OnDemandPercentageAboveBaseCapacity int
		SpotAllocationStrategy              string
	}
}

type xmlOverride struct {
	InstanceType         string           `xml:",omitempty"`
	InstanceRequirements *xmlRequirements `xml:",omitempty"`
}

type xmlTag struct {
	ResourceID        string `xml:"ResourceId"`
	ResourceType      string
	Key               string
	Value             string
	PropagateAtLaunch bool
}

type xmlGroupInstance struct {
	InstanceID              string `xml:"InstanceId"`
	InstanceType            string
	AvailabilityZone        string
	LifecycleState          string
	HealthStatus            string
	LaunchConfigurationName string     `xml:",omitempty"`
	LaunchTemplate          *xmlLTSpec `xml:",omitempty"`
	ProtectedFromScaleIn    bool
}

type xmlGroup struct {
	AutoScalingGroupName             string
	AutoScalingGroupARN              string
	LaunchConfigurationName          string                   `xml:",omitempty"`
	LaunchTemplate                   *xmlLTSpec               `xml:",omitempty"`
	MixedInstancesPolicy             *xmlMixedInstancesPolicy `xml:",omitempty"`
	MinSize                          int
	MaxSize                          int
	DesiredCapacity                  int
	DefaultCooldown                  int
	AvailabilityZones                []string `xml:"AvailabilityZones>member"`
	HealthCheckType                  string
	HealthCheckGracePeriod           int
	Instances                        []xmlGroupInstance `xml:"Instances>member"`
	CreatedTime                      string
	VPCZoneIdentifier                string
	Tags                             []xmlTag `xml:"Tags>member"`
	TerminationPolicies              []string `xml:"TerminationPolicies>member"`
	NewInstancesProtectedFromScaleIn bool
	ServiceLinkedRoleARN             string
}

// describeAutoScalingGroups answers DescribeAutoScalingGroups.
func (s *Server) describeAutoScalingGroups(form url.Values) (any, *apiError) {
	limit, aerr := intParam(form, "MaxRecords", 50, 1, 100, validationError)
	if aerr != nil {
		return nil, aerr
	}
	filters := filtersParam(form)
	for _, f := range filters {
		if f.name != "tag-key" && f.name != "tag-value" && !strings.HasPrefix(f.name, "tag:") {
			return nil, validationError("Filter name '%s' is invalid.", f.name)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reconcileLocked()
	names := listParam(form, "AutoScalingGroupNames.member")
	// AWS takes up to 50 names, or up to MaxRecords when that is larger.
	if len(names) > max(50, limit) {
		return nil, validationError("The number of AutoScalingGroupNames (%d) exceeds the limit (%d); raise MaxRecords to name more.",
			len(names), max(50, limit))
	}
	wanted := map[string]bool{}
	for _, n := range names {
		wanted[n] = true
	}
	var keys []string
	for _, name := range s.sortedGroupNames() {
		if (len(wanted) == 0 || wanted[name]) && matchTags(s.groups[name].Tags, filters) {
			keys = append(keys, name)
		}
	}
	page, next, aerr := paginate(keys, form.Get("NextToken"), limit, "InvalidNextToken")
	if aerr != nil {
		return nil, aerr
	}
	out := struct {
		AutoScalingGroups []xmlGroup `xml:"AutoScalingGroups>member"`
		NextToken         string     `xml:",omitempty"`
	}{NextToken: next}
	for _, name := range page {
		out.AutoScalingGroups = append(out.AutoScalingGroups, s.xmlGroup(s.groups[name]))
	}
	return out, nil
}

// matchTags reports whether tags satisfy every filter: tag-key (a tag with
// one of the keys), tag-value (a tag with one of the values), tag:<key> (the
// tag key with one of the values).
func matchTags(tags map[string]string, filters []filter) bool {
	for _, f := range filters {
		ok := false
		for _, want := range f.values {
			switch {
			case f.name == "tag-key":
				_, ok = tags[want]
			case f.name == "tag-value":
				for _, v := range tags {
					ok = ok || v == want
				}
			default:
				v, has := tags[strings.TrimPrefix(f.name, "tag:")]
				ok = has && v == want
			}
			if ok {
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// groupARN is the ARN of a group.
func (s *Server) groupARN(name string) string {
	return "arn:aws:autoscaling:" + s.region + ":" + accountID +
		":autoScalingGroup:00000000-0000-4000-8000-000000000000:autoScalingGroupName/" + name
}

// xmlGroup renders a group.
func (s *Server) xmlGroup(g *groupState) xmlGroup {
	out := xmlGroup{
		AutoScalingGroupName:             g.Name,
		AutoScalingGroupARN:              s.groupARN(g.Name),
		LaunchConfigurationName:          g.LaunchConfigurationName,
		MinSize:                          g.Min,
		MaxSize:                          g.Max,
		DesiredCapacity:                  g.Desired,
		DefaultCooldown:                  300,
		HealthCheckType:                  "EC2",
		HealthCheckGracePeriod:           300,
		CreatedTime:                      g.created.UTC().Format(asgTimeFormat),
		VPCZoneIdentifier:                strings.Join(g.Subnets, ","),
		TerminationPolicies:              terminationPolicies(g.TerminationPolicies),
		NewInstancesProtectedFromScaleIn: g.NewInstancesProtectedFromScaleIn,
		ServiceLinkedRoleARN:             "arn:aws:iam::" + accountID + ":role/aws-service-role/autoscaling.amazonaws.com/AWSServiceRoleForAutoScaling",
	}
	if g.LaunchTemplate != nil {
		out.LaunchTemplate = s.xmlLTSpec(*g.LaunchTemplate)
	}
	if mi := g.MixedInstances; mi != nil {
		p := &xmlMixedInstancesPolicy{}
		p.LaunchTemplate.LaunchTemplateSpecification = *s.xmlLTSpec(mi.LaunchTemplate)
		for _, o := range mi.Overrides {
			p.LaunchTemplate.Overrides = append(p.LaunchTemplate.Overrides, xmlOverride{InstanceType: o})
		}
		if mi.Requirements != nil {
			p.LaunchTemplate.Overrides = append(p.LaunchTemplate.Overrides, xmlOverride{InstanceRequirements: renderRequirements(mi.Requirements)})
		}
		p.InstancesDistribution.OnDemandAllocationStrategy = "prioritized"
		p.InstancesDistribution.OnDemandPercentageAboveBaseCapacity = 100
		p.InstancesDistribution.OnDemandBaseCapacity = mi.OnDemandBaseCapacity
		if pct := mi.OnDemandPercentageAboveBaseCapacity; pct != nil {
			p.InstancesDistribution.OnDemandPercentageAboveBaseCapacity = *pct
		}
		p.InstancesDistribution.SpotAllocationStrategy = "lowest-price"
		out.MixedInstancesPolicy = p
	}
	zones := map[string]bool{}
	for _, sn := range g.Subnets {
		if z, ok := s.subnets[sn]; ok && !zones[z] {
			zones[z] = true
			out.AvailabilityZones = append(out.AvailabilityZones, z)
		}
	}
	if len(out.AvailabilityZones) == 0 {
		out.AvailabilityZones = []string{s.region + "a"}
	}
	sort.Strings(out.AvailabilityZones)
	for _, in := range g.members {
		if in.Lifecycle != LifecycleTerminated {
			out.Instances = append(out.Instances, s.xmlGroupInstance(in))
		}
	}
	keys := make([]string, 0, len(g.Tags))
	for k := range g.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out.Tags = append(out.Tags, xmlTag{ResourceID: g.Name, ResourceType: "auto-scaling-group",
			Key: k, Value: g.Tags[k], PropagateAtLaunch: true})
	}
	return out
}

// xmlLTSpec renders a launch template spec with both ID and name when the
// template is known, as AWS does.
func (s *Server) xmlLTSpec(spec LaunchTemplateSpec) *xmlLTSpec {
	out := &xmlLTSpec{LaunchTemplateID: spec.ID, LaunchTemplateName: spec.Name, Version: spec.Version}
	if lt := s.findTemplate(spec.ID, spec.Name); lt != nil {
		out.LaunchTemplateID, out.LaunchTemplateName = lt.ID, lt.Name
	}
	return out
}

// xmlGroupInstance renders an instance as a member of its group.
func (s *Server) xmlGroupInstance(in *Instance) xmlGroupInstance {
	out := xmlGroupInstance{
		InstanceID:           in.ID,
		InstanceType:         in.InstanceType,
		AvailabilityZone:     in.Zone,
		LifecycleState:       in.Lifecycle,
		HealthStatus:         "Healthy",
		ProtectedFromScaleIn: in.ProtectedFromScaleIn,
	}
	// What the instance was launched with (its version a number, as AWS
	// reports it), not the group's launch specification now.
	if lt := in.LaunchTemplate; lt.ID != "" || lt.Name != "" {
		out.LaunchTemplate = &xmlLTSpec{LaunchTemplateID: lt.ID, LaunchTemplateName: lt.Name, Version: lt.Version}
	} else {
		out.LaunchConfigurationName = in.LaunchConfigurationName
	}
	return out
}

// setDesiredCapacity answers SetDesiredCapacity.
func (s *Server) setDesiredCapacity(form url.Values) (any, *apiError) {
	name := form.Get("AutoScalingGroupName")
	raw := form.Get("DesiredCapacity")
	desired, err := strconv.Atoi(raw)
	if err != nil {
		return nil, validationError("1 validation error detected: Value '%s' at 'desiredCapacity' failed to satisfy constraint: Member must not be null", raw)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[name]
	if !ok {
		return nil, validationError("AutoScalingGroup name not found - no such group: %s", name)
	}
	if desired > g.Max {
		return nil, validationError("New SetDesiredCapacity value %d is above max value %d for the AutoScalingGroup.", desired, g.Max)
	}
	if desired < g.Min {
		return nil, validationError("New SetDesiredCapacity value %d is below min value %d for the AutoScalingGroup.", desired, g.Min)
	}
	if desired > g.Desired {
		g.lastFail = time.Time{} // a new request is attempted at once
	}
	if desired != g.Desired {
		s.desiredLog = append(s.desiredLog, DesiredChange{Group: name, At: s.now(), From: g.Desired, To: desired})
	}
	g.Desired = desired
	s.reconcileLocked()
	return nil, nil
}

// terminateInstanceInAutoScalingGroup answers
// TerminateInstanceInAutoScalingGroup.
func (s *Server) terminateInstanceInAutoScalingGroup(form url.Values) (any, *apiError) {
	id := form.Get("InstanceId")
	decrement, err := strconv.ParseBool(form.Get("ShouldDecrementDesiredCapacity"))
	if err != nil {
		return nil, validationError("1 validation error detected: Value null at 'shouldDecrementDesiredCapacity' failed to satisfy constraint: Member must not be null")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reconcileLocked()
	in, ok := s.byID[id]
	if !ok || in.Lifecycle == LifecycleTerminated {
		return nil, validationError("Instance Id not found - No managed instance found for instance ID: %s", id)
	}
	g := s.groups[in.Group]
	if in.Lifecycle == LifecycleTerminating {
		return nil, &apiError{status: 400, code: "ScalingActivityInProgress",
			message: "Instance " + id + " is already terminating."}
	}
	if decrement && g.Desired <= g.Min {
		return nil, validationError("Currently, desiredSize equals minSize (%d). Terminating instance without replacement will violate group's min size constraint. Either set shouldDecrementDesiredCapacity flag to false or lower group's min size.", g.Min)
	}
	now := s.now()
	cause := "At " + awsTime(now) + " instance " + id + " was taken out of service in response to a user request"
	if decrement {
		g.Desired--
		cause += ", shrinking the capacity from " + strconv.Itoa(g.Desired+1) + " to " + strconv.Itoa(g.Desired) + "."
	} else {
		cause += "."
	}
	a := s.startTermination(in, g, now, cause)
	s.terminated = append(s.terminated, id)
	s.reconcileLocked()
	return struct{ Activity xmlActivity }{s.xmlActivity(a)}, nil
}

type xmlActivity struct {
	ActivityID           string `xml:"ActivityId"`
	AutoScalingGroupName string
	AutoScalingGroupARN  string
	Description          string
	Cause                string
	StartTime            string
	EndTime              string `xml:",omitempty"`
	StatusCode           string
	StatusMessage        string `xml:",omitempty"`
	Progress             int
	Details              string
}

// xmlActivity renders an activity.
func (s *Server) xmlActivity(a *activity) xmlActivity {
	out := xmlActivity{
		ActivityID:           a.ID,
		AutoScalingGroupName: a.Group,
		AutoScalingGroupARN:  s.groupARN(a.Group),
		Description:          a.Description,
		Cause:                a.Cause,
		StartTime:            a.Start.UTC().Format(asgTimeFormat),
		StatusCode:           a.StatusCode,
		StatusMessage:        a.StatusMsg,
		Progress:             a.Progress,
		Details:              a.Details,
	}
	if out.Details == "" {
		out.Details = "{}"
	}
	if !a.End.IsZero() {
		out.EndTime = a.End.UTC().Format(asgTimeFormat)
	}
	return out
}

// describeScalingActivities answers DescribeScalingActivities, newest first.
func (s *Server) describeScalingActivities(form url.Values) (any, *apiError) {
	limit, aerr := intParam(form, "MaxRecords", 100, 1, 100, validationError)
	if aerr != nil {
		return nil, aerr
	}
	group := form.Get("AutoScalingGroupName")
	ids := map[string]bool{}
	for _, id := range listParam(form, "ActivityIds.member") {
		ids[id] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reconcileLocked()
	byKey := map[string]*activity{}
	var keys []string
	for i, a := range s.activities {
		if (group != "" && a.Group != group) || (len(ids) > 0 && !ids[a.ID]) {
			continue
		}
		k := activityKey(i)
		byKey[k] = a
		keys = append(keys, k)
	}
	sort.Strings(keys)
	page, next, aerr := paginate(keys, form.Get("NextToken"), limit, "InvalidNextToken")
	if aerr != nil {
		return nil, aerr
	}
	out := struct {
		Activities []xmlActivity `xml:"Activities>member"`
		NextToken  string        `xml:",omitempty"`
	}{NextToken: next}
	for _, k := range page {
		out.Activities = append(out.Activities, s.xmlActivity(byKey[k]))
	}
	return out, nil
}

// activityKey sorts activities newest first and stays stable while more are
// added: fixed-width, counting down from a ceiling.
func activityKey(i int) string {
	return fmt.Sprintf("%012d", 999_999_999_999-i)
}

// describeLaunchConfigurations answers DescribeLaunchConfigurations.
func (s *Server) describeLaunchConfigurations(form url.Values) (any, *apiError) {
	limit, aerr := intParam(form, "MaxRecords", 50, 1, 100, validationError)
	if aerr != nil {
		return nil, aerr
	}
	wanted := map[string]bool{}
	for _, n := range listParam(form, "LaunchConfigurationNames.member") {
		wanted[n] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for n := range s.launchConfigs {
		if len(wanted) == 0 || wanted[n] {
			keys = append(keys, n)
		}
	}
	sort.Strings(keys)
	page, next, aerr := paginate(keys, form.Get("NextToken"), limit, "InvalidNextToken")
	if aerr != nil {
		return nil, aerr
	}
	type xmlLC struct {
		LaunchConfigurationName string
		LaunchConfigurationARN  string
		ImageID                 string `xml:"ImageId"`
		InstanceType            string
		CreatedTime             string
	}
	out := struct {
		LaunchConfigurations []xmlLC `xml:"LaunchConfigurations>member"`
		NextToken            string  `xml:",omitempty"`
	}{NextToken: next}
	for _, n := range page {
		out.LaunchConfigurations = append(out.LaunchConfigurations, xmlLC{
			LaunchConfigurationName: n,
			LaunchConfigurationARN: "arn:aws:autoscaling:" + s.region + ":" + accountID +
				":launchConfiguration:00000000-0000-4000-8000-000000000000:launchConfigurationName/" + n,
			ImageID:      "ami-00000000000000000",
			InstanceType: s.launchConfigs[n].InstanceType,
			CreatedTime:  time.Unix(0, 0).UTC().Format(asgTimeFormat),
		})
	}
	return out, nil
}

// describeAutoScalingInstances answers DescribeAutoScalingInstances.
func (s *Server) describeAutoScalingInstances(form url.Values) (any, *apiError) {
	limit, aerr := intParam(form, "MaxRecords", 50, 1, 50, validationError)
	if aerr != nil {
		return nil, aerr
	}
	wanted := map[string]bool{}
	for _, id := range listParam(form, "InstanceIds.member") {
		wanted[id] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reconcileLocked()
	var keys []string
	for id, in := range s.byID {
		if in.Lifecycle != LifecycleTerminated && (len(wanted) == 0 || wanted[id]) {
			keys = append(keys, id)
		}
	}
	sort.Strings(keys)
	page, next, aerr := paginate(keys, form.Get("NextToken"), limit, "InvalidNextToken")
	if aerr != nil {
		return nil, aerr
	}
	type xmlASI struct {
		xmlGroupInstance
		AutoScalingGroupName string
	}
	out := struct {
		AutoScalingInstances []xmlASI `xml:"AutoScalingInstances>member"`
		NextToken            string   `xml:",omitempty"`
	}{NextToken: next}
	for _, id := range page {
		in := s.byID[id]
		gi := s.xmlGroupInstance(in)
		gi.HealthStatus = "HEALTHY"
		out.AutoScalingInstances = append(out.AutoScalingInstances, xmlASI{xmlGroupInstance: gi, AutoScalingGroupName: in.Group})
	}
	return out, nil
}
