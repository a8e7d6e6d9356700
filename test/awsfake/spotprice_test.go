package awsfake

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestDescribeSpotPriceHistory(t *testing.T) {
	s := startFake(t)
	now := time.Now().UTC().Truncate(time.Second)
	for _, p := range []SpotPrice{
		{InstanceType: "m5.large", Zone: "us-east-1a", Price: 0.040, At: now.Add(-3 * time.Hour)},
		{InstanceType: "m5.large", Zone: "us-east-1a", Price: 0.035, At: now.Add(-2 * time.Hour)},
		{InstanceType: "m5.large", Zone: "us-east-1b", Price: 0.038, At: now.Add(-5 * time.Hour)},
		{InstanceType: "m5.large", Zone: "us-east-1b", Product: "Windows", Price: 0.12, At: now.Add(-time.Hour)},
		{InstanceType: "c5.xlarge", Zone: "us-east-1a", Price: 0.07, At: now.Add(-time.Minute)},
	} {
		s.AddSpotPrice(p)
	}
	c := sdkClients(t, s)
	type key struct{ typ, zone string }
	read := func(in *ec2.DescribeSpotPriceHistoryInput) (map[key]string, int) {
		t.Helper()
		got := map[key]string{}
		n := 0
		pages := ec2.NewDescribeSpotPriceHistoryPaginator(c.ec2, in)
		for pages.HasMorePages() {
			out, err := pages.NextPage(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			n += len(out.SpotPriceHistory)
			for _, h := range out.SpotPriceHistory {
				k := key{string(h.InstanceType), aws.ToString(h.AvailabilityZone)}
				if _, seen := got[k]; !seen { // newest first
					got[k] = aws.ToString(h.SpotPrice)
				}
			}
		}
		return got, n
	}
	// From now on: the price in effect now, per type and zone.
	got, n := read(&ec2.DescribeSpotPriceHistoryInput{StartTime: aws.Time(now), ProductDescriptions: []string{"Linux/UNIX"},
		InstanceTypes: []ec2types.InstanceType{"m5.large"}, MaxResults: aws.Int32(1)})
	want := map[key]string{{"m5.large", "us-east-1a"}: "0.035000", {"m5.large", "us-east-1b"}: "0.038000"}
	if n != 2 || len(got) != 2 || got[key{"m5.large", "us-east-1a"}] != want[key{"m5.large", "us-east-1a"}] || got[key{"m5.large", "us-east-1b"}] != want[key{"m5.large", "us-east-1b"}] {
		t.Errorf("current prices %v (%d entries), want %v in 2", got, n, want)
	}
	// The whole history, filtered by zone.
	got, n = read(&ec2.DescribeSpotPriceHistoryInput{Filters: []ec2types.Filter{{Name: aws.String("availability-zone"), Values: []string{"us-east-1a"}}}})
	if n != 3 || got[key{"m5.large", "us-east-1a"}] != "0.035000" || got[key{"c5.xlarge", "us-east-1a"}] != "0.070000" {
		t.Errorf("history of us-east-1a: %v (%d entries), want 3 entries, newest first", got, n)
	}
	if _, err := c.ec2.DescribeSpotPriceHistory(t.Context(), &ec2.DescribeSpotPriceHistoryInput{
		Filters: []ec2types.Filter{{Name: aws.String("spot-price-bogus"), Values: []string{"1"}}}}); apiErrorCode(err) != "InvalidParameterValue" {
		t.Errorf("unknown filter: %v, want InvalidParameterValue", err)
	}
}

func TestSpotLaunchesAndDescribeInstances(t *testing.T) {
	s := startFake(t)
	s.AddInstanceType(InstanceType{Name: "m5.large", VCPU: 2, MemoryMiB: 8192, MaxENIs: 3, IPv4PerENI: 10})
	s.AddSubnet("subnet-a", "us-east-1a")
	s.AddLaunchTemplate(LaunchTemplate{ID: "lt-od", Name: "od", DefaultVersion: 1, Versions: []LaunchTemplateVersion{{Number: 1, InstanceType: "m5.large"}}})
	s.AddLaunchTemplate(LaunchTemplate{ID: "lt-spot", Name: "spot", DefaultVersion: 1,
		Versions: []LaunchTemplateVersion{{Number: 1, InstanceType: "m5.large", MarketType: "spot"}}})
	zero := 0
	s.AddGroup(Group{Name: "mixed", Max: 10, Desired: 3, Subnets: []string{"subnet-a"}, MixedInstances: &MixedInstancesPolicy{
		LaunchTemplate: LaunchTemplateSpec{ID: "lt-od"}, Overrides: []string{"m5.large"}, OnDemandBaseCapacity: 1,
		OnDemandPercentageAboveBaseCapacity: &zero}})
	s.AddGroup(Group{Name: "spot-lt", Max: 10, Desired: 2, Subnets: []string{"subnet-a"}, LaunchTemplate: &LaunchTemplateSpec{ID: "lt-spot"}})
	s.AddGroup(Group{Name: "od", Max: 10, Desired: 1, Subnets: []string{"subnet-a"}, LaunchTemplate: &LaunchTemplateSpec{ID: "lt-od"}})
	for group, want := range map[string][2]int{"mixed": {2, 3}, "spot-lt": {2, 2}, "od": {0, 1}} {
		if spot, all := s.spotCount(group); spot != want[0] || all != want[1] {
			t.Errorf("group %s: %d Spot of %d instances, want %d of %d", group, spot, all, want[0], want[1])
		}
	}
	c := sdkClients(t, s)
	g, err := c.asg.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"mixed"}})
	if err != nil {
		t.Fatal(err)
	}
	d := g.AutoScalingGroups[0].MixedInstancesPolicy.InstancesDistribution
	if aws.ToInt32(d.OnDemandBaseCapacity) != 1 || aws.ToInt32(d.OnDemandPercentageAboveBaseCapacity) != 0 {
		t.Errorf("distribution %d/%d, want 1/0", aws.ToInt32(d.OnDemandBaseCapacity), aws.ToInt32(d.OnDemandPercentageAboveBaseCapacity))
	}
	v, err := c.ec2.DescribeLaunchTemplateVersions(t.Context(), &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: aws.String("lt-spot")})
	if err != nil {
		t.Fatal(err)
	}
	if mo := v.LaunchTemplateVersions[0].LaunchTemplateData.InstanceMarketOptions; mo == nil || mo.MarketType != ec2types.MarketTypeSpot {
		t.Errorf("launch template market options %+v, want spot", mo)
	}
	out, err := c.ec2.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{})
	if err != nil {
		t.Fatal(err)
	}
	spot := 0
	for _, r := range out.Reservations {
		for _, in := range r.Instances {
			if in.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
				spot++
			}
		}
	}
	if spot != 4 {
		t.Errorf("DescribeInstances: %d Spot instances, want 4", spot)
	}
	if _, err := c.ec2.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{InstanceIds: []string{"i-0000000000000000"}}); apiErrorCode(err) != "InvalidInstanceID.NotFound" {
		t.Errorf("unknown instance: %v, want InvalidInstanceID.NotFound", err)
	}
}
