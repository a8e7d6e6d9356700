package aws

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/klog/v2"
)

// launchTTL is how long the instance type of a launch template's $Latest or
// $Default version is kept (they may move). A numbered version and a launch
// configuration cannot change (AWS creates new ones instead): kept for good.
const launchTTL = time.Minute

// factCache keeps what AWS says of instance types and subnets (which do
// not change) and, for launchTTL, of launch templates and configurations.
type factCache struct {
	mu      sync.Mutex
	types   map[string]instanceType
	subnets map[string]string // subnet id -> zone
	launch  map[string]launchEntry
	// subnetsRefusedUntil is when DescribeSubnets is tried again after
	// IAM refused it; zoneFallbackLogged the groups whose template zone
	// fell back to their Availability Zones, logged once each.
	subnetsRefusedUntil time.Time
	zoneFallbackLogged  map[string]bool
	// reqs is what the instance requirements path caches (requirements.go).
	reqs *requirementsCache
}

type launchEntry struct {
	instanceType string
	at           time.Time
	permanent    bool
}

func newFactCache() *factCache {
	return &factCache{types: map[string]instanceType{}, subnets: map[string]string{}, launch: map[string]launchEntry{},
		zoneFallbackLogged: map[string]bool{}}
}

func (c *factCache) subnetZone(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.subnets[id]
}

// instanceTypeFacts returns the facts of an instance type, read once.
func (p *Provider) instanceTypeFacts(ctx context.Context, name string) (instanceType, error) {
	c := p.facts
	c.mu.Lock()
	t, ok := c.types[name]
	c.mu.Unlock()
	if ok {
		return t, nil
	}
	out, err := p.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{ec2types.InstanceType(name)}})
	if err != nil {
		return instanceType{}, callError(fmt.Sprintf("describing instance type %q", name), err, true)
	}
	for _, info := range out.InstanceTypes {
		if string(info.InstanceType) != name {
			continue
		}
		t, err := describeInstanceType(info)
		if err != nil {
			return instanceType{}, err
		}
		c.mu.Lock()
		c.types[name] = t
		c.mu.Unlock()
		return t, nil
	}
	return instanceType{}, fmt.Errorf("instance type %q: AWS does not describe it", name)
}

// launchInstanceType returns the instance type the group's launch template
// version or launch configuration names.
func (p *Provider) launchInstanceType(ctx context.Context, g *groupDesc) (string, error) {
	switch {
	case g.LaunchTemplate != nil:
		return p.cachedLaunch(ctx, "lt:"+g.LaunchTemplate.String(), g.LaunchTemplate.numbered(), func() (string, error) {
			return p.templateVersionType(ctx, *g.LaunchTemplate)
		})
	case g.LaunchConfiguration != "":
		return p.cachedLaunch(ctx, "lc:"+g.LaunchConfiguration, true, func() (string, error) {
			return p.configurationType(ctx, g.LaunchConfiguration)
		})
	}
	return "", fmt.Errorf("the Auto Scaling group %q has neither a launch template nor a launch configuration", g.Name)
}

// numbered reports whether the reference names a numbered version, which
// never changes (unlike $Default and $Latest).
func (r launchTemplateRef) numbered() bool {
	v := r.version()
	return v != "$Default" && v != "$Latest"
}

func (p *Provider) cachedLaunch(ctx context.Context, key string, permanent bool, read func() (string, error)) (string, error) {
	now := p.clock.Now()
	c := p.facts
	c.mu.Lock()
	e, ok := c.launch[key]
	c.mu.Unlock()
	if ok && (e.permanent || now.Sub(e.at) < launchTTL) {
		return e.instanceType, nil
	}
	t, err := read()
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.launch[key] = launchEntry{instanceType: t, at: now, permanent: permanent}
	c.mu.Unlock()
	klog.FromContext(ctx).V(4).Info("Read the instance type of a launch specification", "launch", key, "instanceType", t)
	return t, nil
}

func (p *Provider) templateVersionType(ctx context.Context, ref launchTemplateRef) (string, error) {
	in := &ec2.DescribeLaunchTemplateVersionsInput{Versions: []string{ref.version()}}
	if ref.ID != "" {
		in.LaunchTemplateId = aws.String(ref.ID)
	} else {
		in.LaunchTemplateName = aws.String(ref.Name)
	}
	if v := ref.version(); v != "$Default" && v != "$Latest" {
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 1 {
			return "", fmt.Errorf("launch template %s: version %q is not $Default, $Latest or a number", ref, v)
		}
	}
	out, err := p.ec2.DescribeLaunchTemplateVersions(ctx, in)
	if err != nil {
		return "", callError(fmt.Sprintf("describing launch template %s", ref), err, true)
	}
	for _, v := range out.LaunchTemplateVersions {
		p.noteLaunchReservation(ref, v.LaunchTemplateData) // reservations.go
		if v.LaunchTemplateData != nil && v.LaunchTemplateData.InstanceType != "" {
			p.noteLaunchMarket(ref, v.LaunchTemplateData) // capacitytype.go
			return string(v.LaunchTemplateData.InstanceType), nil
		}
	}
	return "", fmt.Errorf("launch template %s names no instance type", ref)
}

func (p *Provider) configurationType(ctx context.Context, name string) (string, error) {
	out, err := p.asg.DescribeLaunchConfigurations(ctx, &autoscaling.DescribeLaunchConfigurationsInput{LaunchConfigurationNames: []string{name}})
	if err != nil {
		return "", callError(fmt.Sprintf("describing launch configuration %q", name), err, true)
	}
	for _, lc := range out.LaunchConfigurations {
		if deref(lc.LaunchConfigurationName) == name && deref(lc.InstanceType) != "" {
			return deref(lc.InstanceType), nil
		}
	}
	return "", fmt.Errorf("launch configuration %q: AWS does not describe it with an instance type", name)
}
