package aws

import (
	"context"
	"testing"
	"time"

	awsprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/aws"
	"k8s.io/autoscaler/cluster-autoscaler/test/awsfake"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestAWSPriceExpanderPicksSpotAndOnDemandPodsStayOnDemand: with
// --expander=price, of two groups of m5.large (one On-Demand, one all Spot
// by its mixed-instances policy) the binary scales the Spot one for pods
// that do not care (Spot at 0.031 against On-Demand at 0.096 from the
// Price List API), and the On-Demand one for pods selecting
// karpenter.sh/capacity-type=on-demand, whose Spot template they do not
// fit. The On-Demand group's nodes carry that label from a tag, as a
// self-managed node's kubelet --node-labels would.
func TestAWSPriceExpanderPicksSpotAndOnDemandPodsStayOnDemand(t *testing.T) {
	e := framework.New(t)
	s := startAWS(e)
	s.AddOnDemandPrice(awsfake.OnDemandPrice{Region: "us-east-1", InstanceType: "m5.large", USDPerHour: 0.096})
	for _, z := range []string{"us-east-1a", "us-east-1b"} {
		s.AddSpotPrice(awsfake.SpotPrice{InstanceType: "m5.large", Zone: z, Price: 0.031, At: time.Now().Add(-time.Hour)})
	}
	mixed := func(name string, spot bool, tags map[string]string) awsfake.Group {
		g := awsGroup(name, 0, 5, 0, tags)
		g.MixedInstances = &awsfake.MixedInstancesPolicy{LaunchTemplate: *g.LaunchTemplate, Overrides: []string{"m5.large"}}
		g.LaunchTemplate = nil
		if spot {
			zero := 0
			g.MixedInstances.OnDemandPercentageAboveBaseCapacity = &zero
		}
		return g
	}
	s.AddGroup(mixed("on-demand", false, map[string]string{awsprovider.LabelTagPrefix + awsprovider.CapacityTypeLabel: "on-demand"}))
	s.AddGroup(mixed("spot", true, nil))
	itest.DumpPods(e)
	itest.Deployment(e, "batch", 2, map[string]string{"shape": "standard"}) // 1 CPU each: one m5.large

	p := itest.StartAutoscalerEnv(t, s.Env(), "autoscaler", awsArgs(e, "--nodes=0:5:on-demand", "--nodes=0:5:spot", "--expander=price")...)
	e.Eventually(90*time.Second, "both batch pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 2)
	})
	if od, spot := s.GroupState("on-demand").Desired, s.GroupState("spot").Desired; od != 0 || spot < 1 {
		t.Errorf("desired capacities on-demand %d, spot %d; want the cheaper spot group scaled, on-demand untouched", od, spot)
	}
	itest.Deployment(e, "steady", 2, map[string]string{awsprovider.CapacityTypeLabel: "on-demand"})
	e.Eventually(90*time.Second, "all 4 pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 4)
	})
	if od := s.GroupState("on-demand").Desired; od < 1 {
		t.Errorf("on-demand desired capacity %d, want it scaled for the pods selecting On-Demand", od)
	}
	for _, in := range s.Instances("spot") {
		if !in.Spot {
			t.Errorf("instance %s of the spot group is not Spot", in.ID)
		}
	}
	if got := s.Calls()["GetProducts"]; got < 1 || got > 2 {
		t.Errorf("%d GetProducts calls, want 1 (prices kept for a day)", got)
	}
	if p.Log.Contains(`"Reading On-Demand prices from the Price List API; using the built-in list`) {
		t.Error("the binary could not read the Price List API")
	}
}
