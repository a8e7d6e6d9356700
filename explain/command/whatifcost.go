package command

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/explain/readonly"
)

// whatIfCost is the hourly price of the nodes a what-if would add, under
// the provider's pricing model (the price expander's).
type whatIfCost struct {
	// NoModel says why there is no price: the provider has no pricing
	// model, or a group's template could not be priced.
	NoModel string `json:"noPriceModel,omitempty"`
	// PerHour is each group's added nodes' price for one hour; Total
	// their sum.
	PerHour map[string]float64 `json:"perHour,omitempty"`
	Total   float64            `json:"totalPerHour"`
}

// priceIncreases prices increases with provider's pricing model at now,
// when the expanders include price; nil otherwise.
func priceIncreases(ctx context.Context, expanders []string, provider cloudprovider.CloudProvider,
	increases []readonly.Increase, now time.Time) *whatIfCost {
	if !slices.Contains(expanders, "price") {
		return nil
	}
	pricing, err := provider.Pricing(ctx)
	if err != nil || pricing == nil {
		return &whatIfCost{NoModel: "no price model: the cloud provider has none"}
	}
	groups, err := provider.NodeGroups(ctx)
	if err != nil {
		return &whatIfCost{NoModel: fmt.Sprintf("no price: listing node groups: %v", err)}
	}
	c := &whatIfCost{PerHour: map[string]float64{}}
	for _, inc := range increases {
		i := slices.IndexFunc(groups, func(g cloudprovider.NodeGroup) bool { return g.Id() == inc.NodeGroup })
		if i < 0 {
			return &whatIfCost{NoModel: fmt.Sprintf("no price: node group %s is gone", inc.NodeGroup)}
		}
		ni, err := groups[i].TemplateNodeInfo(ctx)
		if err != nil || ni == nil || ni.Node == nil {
			return &whatIfCost{NoModel: fmt.Sprintf("no price: node group %s has no template node to price (%v)", inc.NodeGroup, err)}
		}
		price, err := pricing.NodePrice(ctx, ni.Node, now, now.Add(time.Hour))
		if err != nil {
			return &whatIfCost{NoModel: fmt.Sprintf("no price model for node group %s: %v", inc.NodeGroup, err)}
		}
		c.PerHour[inc.NodeGroup] += price * float64(inc.Delta)
		c.Total += price * float64(inc.Delta)
	}
	return c
}

// of is the text of one increase's cost, "" without prices.
func (c *whatIfCost) of(inc readonly.Increase) string {
	if c == nil || c.NoModel != "" {
		return ""
	}
	return fmt.Sprintf(", %.4f per hour", c.PerHour[inc.NodeGroup])
}

// write writes the total, or why there is none.
func (c *whatIfCost) write(out io.Writer) {
	switch {
	case c == nil:
	case c.NoModel != "":
		_, _ = fmt.Fprintf(out, "Cost: %s\n", c.NoModel)
	default:
		_, _ = fmt.Fprintf(out, "Cost of the added nodes: %.4f per hour (price expander's pricing model)\n", c.Total)
	}
}
