package command

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/explain/readonly"
)

type hourly float64

func (h hourly) NodePrice(_ context.Context, _ *apiv1.Node, start, end time.Time) (float64, error) {
	return float64(h) * end.Sub(start).Hours(), nil
}

func (h hourly) PodPrice(context.Context, *apiv1.Pod, time.Time, time.Time) (float64, error) {
	return 0, nil
}

func TestPriceIncreases(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("a", 0, 10, 0, &apiv1.Node{})
	incs := []readonly.Increase{{NodeGroup: "a", Delta: 3}}
	if c := priceIncreases(ctx, []string{"least-waste"}, p, incs, now); c != nil {
		t.Errorf("cost without the price expander: %+v, want none", c)
	}
	if c := priceIncreases(ctx, []string{"price"}, p, incs, now); c == nil || !strings.HasPrefix(c.NoModel, "no price model") {
		t.Errorf("cost without a pricing model: %+v, want \"no price model\"", c)
	}
	p.SetPricing(hourly(0.5))
	want := &whatIfCost{PerHour: map[string]float64{"a": 1.5}, Total: 1.5}
	if diff := cmp.Diff(want, priceIncreases(ctx, []string{"priority", "price"}, p, incs, now)); diff != "" {
		t.Errorf("cost (-want +got):\n%s", diff)
	}
	incs = append(incs, readonly.Increase{NodeGroup: "gone", Delta: 1})
	if c := priceIncreases(ctx, []string{"price"}, p, incs, now); c == nil || !strings.Contains(c.NoModel, "gone") {
		t.Errorf("cost of an unknown group: %+v, want why there is none", c)
	}
}
