package aws

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/expander"
	"k8s.io/autoscaler/cluster-autoscaler/test/awsfake"
)

// newPricedProvider is newTestProvider with the SDK's Price List client
// (pointed at the fake by AWS_ENDPOINT_URL_PRICING) and a fake clock.
func newPricedProvider(t *testing.T, clk *clocktesting.FakeClock, nodes []string) *Provider {
	t.Helper()
	cfg, err := loadConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p := newTestProvider(t, nodes, nil, WithClock(clk), WithPricingAPI(newPricingClient(cfg)))
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

// hourly prices a node over one hour.
func hourly(t *testing.T, p *Provider, node *apiv1.Node) float64 {
	t.Helper()
	m, err := p.Pricing(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Unix(0, 0)
	v, err := m.NodePrice(context.Background(), node, start, start.Add(time.Hour))
	if err != nil {
		t.Fatalf("NodePrice(%s): %v", node.Name, err)
	}
	return math.Round(v*1e6) / 1e6
}

func templateOf(t *testing.T, p *Provider, name string) *apiv1.Node {
	t.Helper()
	info, err := group(t, p, name).TemplateNodeInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.Node
}

// calls counts an action's calls (the SDK's retries left out) during fn.
func calls(s *awsfake.Server, action string, fn func()) int {
	before := s.Calls()[action] - s.Retries()[action]
	fn()
	return s.Calls()[action] - s.Retries()[action] - before
}

// TestOnDemandPricesFromThePriceListAPI: a template's On-Demand price is
// the Price List API's (the filters keep the Windows, Dedicated and
// reservation products out), read once a day: one GetProducts call for
// many prices and loops, one more after a day.
func TestOnDemandPricesFromThePriceListAPI(t *testing.T) {
	s := startFake(t)
	s.AddOnDemandPrice(awsfake.OnDemandPrice{Region: "us-east-1", InstanceType: "m5.large", USDPerHour: 0.2})
	s.AddOnDemandPrice(awsfake.OnDemandPrice{Region: "us-east-1", InstanceType: "c5.xlarge", USDPerHour: 0.3})
	s.AddOnDemandPrice(awsfake.OnDemandPrice{Region: "eu-west-1", InstanceType: "m5.large", USDPerHour: 0.5})
	s.AddGroup(awsfake.Group{Name: "small", Max: 10, LaunchTemplate: lt("1"), Subnets: []string{"subnet-a"}})
	s.AddGroup(awsfake.Group{Name: "big", Max: 10, LaunchTemplate: lt("2"), Subnets: []string{"subnet-a"}})
	clk := clocktesting.NewFakeClock(time.Now())
	p := newPricedProvider(t, clk, []string{"0:10:small", "0:10:big"})
	n := calls(s, "GetProducts", func() {
		for range 10 {
			if got := hourly(t, p, templateOf(t, p, "small")); got != 0.2 {
				t.Fatalf("m5.large: %v an hour, want the API's 0.2", got)
			}
			if got := hourly(t, p, templateOf(t, p, "big")); got != 0.3 {
				t.Fatalf("c5.xlarge: %v an hour, want the API's 0.3", got)
			}
			clk.Step(time.Hour)
		}
	})
	if n != 1 {
		t.Errorf("%d GetProducts calls in 10 hours, want 1", n)
	}
	s.AddOnDemandPrice(awsfake.OnDemandPrice{Region: "us-east-1", InstanceType: "m5.large", USDPerHour: 0.25})
	clk.Step(onDemandTTL)
	if n := calls(s, "GetProducts", func() {
		if got := hourly(t, p, templateOf(t, p, "small")); got != 0.25 {
			t.Errorf("after a day: %v, want the new 0.25", got)
		}
	}); n != 1 {
		t.Errorf("%d GetProducts calls after a day, want 1", n)
	}
}

// TestOnDemandPricesFallBackToTheBuiltinList: with pricing:GetProducts
// refused, prices come from the built-in list and the API is tried again
// after an hour, not on every price; a type of neither has no price.
func TestOnDemandPricesFallBackToTheBuiltinList(t *testing.T) {
	s := startFake(t)
	s.Deny("GetProducts")
	s.AddOnDemandPrice(awsfake.OnDemandPrice{Region: "us-east-1", InstanceType: "m5.large", USDPerHour: 0.2})
	s.AddGroup(awsfake.Group{Name: "small", Max: 10, LaunchTemplate: lt("1"), Subnets: []string{"subnet-a"}})
	clk := clocktesting.NewFakeClock(time.Now())
	p := newPricedProvider(t, clk, []string{"0:10:small"})
	tmpl := templateOf(t, p, "small")
	if n := calls(s, "GetProducts", func() {
		for range 5 {
			if got := hourly(t, p, tmpl); got != builtinOnDemand["us-east-1"]["m5.large"] {
				t.Fatalf("refused: %v, want the built-in %v", got, builtinOnDemand["us-east-1"]["m5.large"])
			}
			clk.Step(10 * time.Minute)
		}
	}); n < 1 || n > 2 { // the SDK does not retry AccessDenied
		t.Errorf("%d GetProducts calls in 50 minutes while refused, want 1", n)
	}
	s.Deny()
	clk.Step(onDemandRetry)
	if got := hourly(t, p, tmpl); got != 0.2 {
		t.Errorf("allowed again an hour later: %v, want the API's 0.2", got)
	}
	m, _ := p.Pricing(context.Background())
	odd := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "odd", Labels: map[string]string{apiv1.LabelInstanceTypeStable: "x9.huge"}}}
	if _, err := m.NodePrice(context.Background(), odd, time.Unix(0, 0), time.Unix(3600, 0)); err == nil || !strings.Contains(err.Error(), "x9.huge") {
		t.Errorf("a type without a price: %v, want an error naming it", err)
	}
}

// TestSpotPricesPerTypeAndZone: a Spot template is priced at the latest
// Spot price of its type in its zone, read with DescribeSpotPriceHistory
// once for the groups' types and again every spotTTL; a running Spot
// node at its own zone's price.
func TestSpotPricesPerTypeAndZone(t *testing.T) {
	s := startFake(t)
	addSpotTemplate(s)
	now := time.Now()
	s.AddSpotPrice(awsfake.SpotPrice{InstanceType: "m5.large", Zone: "us-east-1a", Price: 0.05, At: now.Add(-3 * time.Hour)})
	s.AddSpotPrice(awsfake.SpotPrice{InstanceType: "m5.large", Zone: "us-east-1a", Price: 0.031, At: now.Add(-time.Hour)})
	s.AddSpotPrice(awsfake.SpotPrice{InstanceType: "m5.large", Zone: "us-east-1b", Price: 0.027, At: now.Add(-time.Hour)})
	s.AddSpotPrice(awsfake.SpotPrice{InstanceType: "m5.large", Zone: "us-east-1a", Product: "Windows", Price: 0.01, At: now.Add(-time.Hour)})
	s.AddGroup(awsfake.Group{Name: "spot", Max: 10, Desired: 2, LaunchTemplate: &awsfake.LaunchTemplateSpec{ID: "lt-spot"},
		Subnets: []string{"subnet-a", "subnet-b"}})
	s.AddGroup(awsfake.Group{Name: "od", Max: 10, LaunchTemplate: lt("1"), Subnets: []string{"subnet-a"}})
	// The provider's clock runs 10 minutes behind the fake's (real) one,
	// so that a price change added later is in the fake's past.
	clk := clocktesting.NewFakeClock(now.Add(-10 * time.Minute))
	p := newPricedProvider(t, clk, []string{"0:10:spot", "0:10:od"})
	spot, od := templateOf(t, p, "spot"), templateOf(t, p, "od")
	n := calls(s, "DescribeSpotPriceHistory", func() {
		if got := hourly(t, p, spot); got != 0.031 {
			t.Errorf("Spot template in us-east-1a: %v, want the latest Linux price 0.031", got)
		}
		if got := hourly(t, p, od); got != 0.096 {
			t.Errorf("On-Demand template: %v, want 0.096", got)
		}
		for _, in := range s.Instances("spot") {
			node := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: in.ID, Labels: map[string]string{
				apiv1.LabelInstanceTypeStable: in.InstanceType, apiv1.LabelTopologyZone: in.Zone}},
				Spec: apiv1.NodeSpec{ProviderID: providerID(in.Zone, in.ID)}}
			want := map[string]float64{"us-east-1a": 0.031, "us-east-1b": 0.027}[in.Zone]
			if got := hourly(t, p, node); got != want {
				t.Errorf("Spot node in %s: %v, want %v", in.Zone, got, want)
			}
		}
	})
	if n != 1 {
		t.Errorf("%d DescribeSpotPriceHistory calls, want 1", n)
	}
	s.AddSpotPrice(awsfake.SpotPrice{InstanceType: "m5.large", Zone: "us-east-1a", Price: 0.04, At: now.Add(-time.Minute)})
	clk.Step(time.Minute)
	if got := hourly(t, p, spot); got != 0.031 {
		t.Errorf("a minute later: %v, want the kept 0.031", got)
	}
	clk.Step(spotTTL)
	if n := calls(s, "DescribeSpotPriceHistory", func() {
		if got := hourly(t, p, spot); got != 0.04 {
			t.Errorf("after %v: %v, want the new 0.04", spotTTL, got)
		}
	}); n != 1 {
		t.Errorf("%d calls after %v, want 1", n, spotTTL)
	}
}

// TestPricingCallsAreBounded: an hour of 10-second loops pricing every
// template and a few nodes makes one GetProducts call (one page here) and
// a DescribeSpotPriceHistory call per spotTTL.
func TestPricingCallsAreBounded(t *testing.T) {
	s := startFake(t)
	addSpotTemplate(s)
	s.AddOnDemandPrice(awsfake.OnDemandPrice{Region: "us-east-1", InstanceType: "m5.large", USDPerHour: 0.096})
	s.AddOnDemandPrice(awsfake.OnDemandPrice{Region: "us-east-1", InstanceType: "c5.xlarge", USDPerHour: 0.17})
	s.AddSpotPrice(awsfake.SpotPrice{InstanceType: "m5.large", Zone: "us-east-1a", Price: 0.03, At: time.Now().Add(-time.Hour)})
	s.AddGroup(awsfake.Group{Name: "spot", Max: 10, Desired: 2, LaunchTemplate: &awsfake.LaunchTemplateSpec{ID: "lt-spot"}, Subnets: []string{"subnet-a"}})
	s.AddGroup(mixedGroup("spot-mixed", 0, 0, percent(0)))
	s.AddGroup(awsfake.Group{Name: "big", Max: 10, LaunchTemplate: lt("2"), Subnets: []string{"subnet-a"}})
	clk := clocktesting.NewFakeClock(time.Now())
	p := newPricedProvider(t, clk, []string{"0:10:spot", "0:10:spot-mixed", "0:10:big"})
	ctx := context.Background()
	before := s.Calls()
	const loops = 360
	for range loops {
		clk.Step(scanInterval)
		if err := p.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"spot", "spot-mixed", "big"} {
			hourly(t, p, templateOf(t, p, name))
		}
		for _, in := range s.Instances("spot") {
			hourly(t, p, &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: in.ID, Labels: map[string]string{
				apiv1.LabelInstanceTypeStable: in.InstanceType, apiv1.LabelTopologyZone: in.Zone}},
				Spec: apiv1.NodeSpec{ProviderID: providerID(in.Zone, in.ID)}})
		}
	}
	after, retried := s.Calls(), s.Retries()
	gp := after["GetProducts"] - before["GetProducts"] - retried["GetProducts"]
	sp := after["DescribeSpotPriceHistory"] - before["DescribeSpotPriceHistory"] - retried["DescribeSpotPriceHistory"]
	di := after["DescribeInstances"] - before["DescribeInstances"]
	t.Logf("%d loops (1 hour): GetProducts %d, DescribeSpotPriceHistory %d, DescribeInstances %d", loops, gp, sp, di)
	if gp != 1 || sp < 11 || sp > 13 || di != 0 {
		t.Errorf("GetProducts %d (want 1), DescribeSpotPriceHistory %d (want 12 ± 1), DescribeInstances %d (want 0)", gp, sp, di)
	}
}

// TestPriceExpanderPicksTheCheaperGroup: --expander=price on AWS: of two
// groups of the same type, the Spot one is chosen for a pod that does not
// care (cheaper), the On-Demand one for a pod selecting On-Demand (the
// only one whose template it fits).
func TestPriceExpanderPicksTheCheaperGroup(t *testing.T) {
	s := startFake(t)
	s.AddOnDemandPrice(awsfake.OnDemandPrice{Region: "us-east-1", InstanceType: "m5.large", USDPerHour: 0.096})
	s.AddSpotPrice(awsfake.SpotPrice{InstanceType: "m5.large", Zone: "us-east-1a", Price: 0.033, At: time.Now().Add(-time.Hour)})
	s.AddGroup(mixedGroup("od", 0, 0, nil))
	s.AddGroup(mixedGroup("spot", 0, 0, percent(0)))
	clk := clocktesting.NewFakeClock(time.Now())
	p := newPricedProvider(t, clk, []string{"0:10:od", "0:10:spot"})
	ctx := context.Background()
	chain, err := expander.NewChain(ctx, []string{"price"}, expander.Deps{Provider: p, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	infos := map[string]*cloudprovider.NodeInfo{}
	for _, n := range []string{"od", "spot"} {
		info, err := group(t, p, n).TemplateNodeInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		infos[n] = info
	}
	choose := func(pod *apiv1.Pod) string {
		var options []expander.Option
		for _, n := range []string{"od", "spot"} {
			if fits(t, pod, infos[n].Node) {
				options = append(options, expander.Option{NodeGroup: group(t, p, n), NodeCount: 1, Pods: []*apiv1.Pod{pod}})
			}
		}
		best := chain.BestOption(ctx, options, infos)
		if best == nil {
			return ""
		}
		return best.NodeGroup.Id()
	}
	any := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "any", Namespace: "default"}, Spec: apiv1.PodSpec{Containers: []apiv1.Container{{
		Name: "c", Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("1")}}}}}}
	if got := choose(any); got != "spot" {
		t.Errorf("a pod that does not care: %q chosen, want the cheaper spot", got)
	}
	onDemand := podSelecting(CapacityTypeLabel, "on-demand", false)
	onDemand.Spec.Containers = any.Spec.Containers
	if got := choose(onDemand); got != "od" {
		t.Errorf("a pod selecting On-Demand: %q chosen, want od", got)
	}
}
