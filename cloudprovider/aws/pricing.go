package aws

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	ptypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// PricingAPI is what the provider calls of the Price List Query API client.
type PricingAPI interface {
	GetProducts(ctx context.Context, in *pricing.GetProductsInput, opts ...func(*pricing.Options)) (*pricing.GetProductsOutput, error)
}

// spotPriceAPI is the EC2 call that tells Spot prices (the SDK's EC2
// client has it; a test double may not).
type spotPriceAPI interface {
	DescribeSpotPriceHistory(ctx context.Context, in *ec2.DescribeSpotPriceHistoryInput, opts ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error)
}

// How prices are kept. The On-Demand list of the region is read once a
// day (onDemandTTL), at most onDemandPages pages of 100 products; after a
// failure (unreachable, refused) the built-in list serves and the API is
// tried again after onDemandRetry. Spot prices of the types asked (and of
// the groups' types) are read every spotTTL, one call per spotBatch types
// and page of 1000; after a failure again after spotRetry.
const (
	onDemandTTL   = 24 * time.Hour
	onDemandRetry = time.Hour
	onDemandPages = 40
	spotTTL       = 5 * time.Minute
	spotRetry     = time.Minute
	spotBatch     = 100
	spotPages     = 10
)

// linuxUnix is the Spot product description of Linux instances in a VPC.
const linuxUnix = "Linux/UNIX"

// WithPricingAPI makes the provider read On-Demand prices through c
// (Build passes the SDK's Price List client). Without it the built-in
// price list serves.
func WithPricingAPI(c PricingAPI) Option {
	return func(p *Provider) { p.prices.api = c }
}

// newPricingClient is the Price List client: its endpoints are in
// us-east-1, eu-central-1, ap-south-1 (and cn-northwest-1 for China); the
// nearest one serves every region's prices.
func newPricingClient(cfg aws.Config) PricingAPI {
	return pricing.NewFromConfig(cfg, func(o *pricing.Options) { o.Region = pricingRegion(cfg.Region) })
}

func pricingRegion(region string) string {
	switch {
	case strings.HasPrefix(region, "cn-"):
		return "cn-northwest-1"
	case strings.HasPrefix(region, "eu-"), strings.HasPrefix(region, "me-"), strings.HasPrefix(region, "af-"), strings.HasPrefix(region, "il-"):
		return "eu-central-1"
	case strings.HasPrefix(region, "ap-"):
		return "ap-south-1"
	}
	return "us-east-1"
}

// priceBook keeps the prices read. mu serialises the reads.
type priceBook struct {
	api PricingAPI

	mu           sync.Mutex
	onDemand     map[string]float64 // instance type -> USD/h, from the API
	onDemandNext time.Time          // when the API is read again
	spot         map[string]map[string]float64
	spotAt       time.Time // when the Spot prices were read
	spotNext     time.Time // no read before (after a failure)
	spotWanted   map[string]bool
}

func newPriceBook() *priceBook {
	return &priceBook{spotWanted: map[string]bool{}}
}

// Pricing implements cloudprovider.CloudProvider's pricing model.
type awsPricing struct{ p *Provider }

var _ cloudprovider.PricingModel = awsPricing{}

// NodePrice prices a node (a running one or a group's template) by its
// instance type, zone and capacity type: the Spot price of the type in its
// zone (the cheapest zone's when it has none there) for a Spot node, else
// the On-Demand price (also for a group whose new instances may be either,
// and for Spot with no Spot price known: a bound from above).
func (m awsPricing) NodePrice(ctx context.Context, node *apiv1.Node, start, end time.Time) (float64, error) {
	typ := node.Labels[apiv1.LabelInstanceTypeStable]
	if typ == "" {
		typ = node.Labels[apiv1.LabelInstanceType]
	}
	if typ == "" {
		return 0, fmt.Errorf("node %s has no instance type label", node.Name)
	}
	hourly, err := m.p.onDemandPrice(ctx, typ)
	if m.p.nodeCapacity(ctx, node) == capacitySpot {
		if sp, ok := m.p.spotPrice(ctx, typ, node.Labels[apiv1.LabelTopologyZone]); ok {
			hourly, err = sp, nil
		}
	}
	if err != nil {
		return 0, err
	}
	return hourly * end.Sub(start).Hours(), nil
}

// referenceType is the type whose On-Demand price prices pods: a pod is
// worth its share of one, by CPU or memory, whichever is more.
const (
	referenceType      = "m5.large"
	referenceCPU       = 2.0
	referenceMemoryGiB = 8.0
	referenceUSD       = 0.096 // when no price of referenceType is known
)

// PodPrice prices a pod by its requests as a share of referenceType.
func (m awsPricing) PodPrice(ctx context.Context, pod *apiv1.Pod, start, end time.Time) (float64, error) {
	ref, err := m.p.onDemandPrice(ctx, referenceType)
	if err != nil {
		ref = referenceUSD
	}
	var cpu, mem float64
	for _, c := range pod.Spec.Containers {
		cpu += c.Resources.Requests.Cpu().AsApproximateFloat64()
		mem += c.Resources.Requests.Memory().AsApproximateFloat64()
	}
	share := max(cpu/referenceCPU, mem/(referenceMemoryGiB*(1<<30)))
	return ref * share * end.Sub(start).Hours(), nil
}

// onDemandPrice is the On-Demand hourly price of a type in the provider's
// region: the API's (read when due), else the built-in list's.
func (p *Provider) onDemandPrice(ctx context.Context, typ string) (float64, error) {
	b := p.prices
	b.mu.Lock()
	defer b.mu.Unlock()
	if now := p.clock.Now(); b.api != nil && !now.Before(b.onDemandNext) {
		prices, err := p.readOnDemand(ctx)
		if err != nil {
			b.onDemandNext = now.Add(onDemandRetry)
			klog.FromContext(ctx).Error(err, "Reading On-Demand prices from the Price List API; using the built-in list (of "+builtinPricesDate+") meanwhile",
				"region", p.region, "retryIn", onDemandRetry)
		} else {
			b.onDemand, b.onDemandNext = prices, now.Add(onDemandTTL)
			klog.FromContext(ctx).V(2).Info("Read On-Demand prices", "region", p.region, "types", len(prices))
		}
	}
	if v, ok := b.onDemand[typ]; ok {
		return v, nil
	}
	if v, ok := builtinOnDemand[p.region][typ]; ok {
		return v, nil
	}
	return 0, fmt.Errorf("no On-Demand price known for instance type %s in %s", typ, p.region)
}

// readOnDemand reads the region's On-Demand prices of Linux instances on
// shared tenancy (one product per type with these filters).
func (p *Provider) readOnDemand(ctx context.Context) (map[string]float64, error) {
	term := func(field, value string) ptypes.Filter {
		return ptypes.Filter{Type: ptypes.FilterTypeTermMatch, Field: aws.String(field), Value: aws.String(value)}
	}
	in := &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), FormatVersion: aws.String("aws_v1"), MaxResults: aws.Int32(100),
		Filters: []ptypes.Filter{term("regionCode", p.region), term("operatingSystem", "Linux"), term("tenancy", "Shared"),
			term("preInstalledSw", "NA"), term("capacitystatus", "Used")}}
	pages := pricing.NewGetProductsPaginator(p.prices.api, in, func(o *pricing.GetProductsPaginatorOptions) { o.StopOnDuplicateToken = true })
	out := map[string]float64{}
	for n := 0; pages.HasMorePages(); n++ {
		if n >= onDemandPages {
			return nil, fmt.Errorf("reading On-Demand prices: more than %d pages", onDemandPages)
		}
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, callError("reading On-Demand prices (pricing:GetProducts)", err, true)
		}
		for _, doc := range page.PriceList {
			typ, usd, ok := parseOnDemand(doc)
			if ok && (out[typ] == 0 || usd < out[typ]) {
				out[typ] = usd
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("reading On-Demand prices: the Price List API lists no priced product for %s", p.region)
	}
	return out, nil
}

// priceDocument is what a price list document (format aws_v1) says that
// matters here.
type priceDocument struct {
	Product struct {
		Attributes map[string]string `json:"attributes"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				Unit         string            `json:"unit"`
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

// parseOnDemand reads a product's instance type and its On-Demand hourly
// USD price; false when the document has no positive one.
func parseOnDemand(doc string) (string, float64, bool) {
	var d priceDocument
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		return "", 0, false
	}
	typ := d.Product.Attributes["instanceType"]
	if typ == "" {
		return "", 0, false
	}
	for _, t := range d.Terms.OnDemand {
		for _, dim := range t.PriceDimensions {
			if dim.Unit != "Hrs" {
				continue
			}
			if usd, err := strconv.ParseFloat(dim.PricePerUnit["USD"], 64); err == nil && usd > 0 {
				return typ, usd, true
			}
		}
	}
	return "", 0, false
}

// spotPrice is the latest Spot price of a type in a zone ("" or a zone
// without one: the cheapest zone's); false when none is known. A type not
// asked before is read at once, with the groups' types; all are read again
// every spotTTL.
func (p *Provider) spotPrice(ctx context.Context, typ, zone string) (float64, bool) {
	api, ok := p.ec2.(spotPriceAPI)
	if !ok {
		return 0, false
	}
	b := p.prices
	b.mu.Lock()
	defer b.mu.Unlock()
	now := p.clock.Now()
	due := now.Sub(b.spotAt) >= spotTTL
	if !b.spotWanted[typ] {
		due = true
		b.spotWanted[typ] = true
		for _, t := range p.groupTypes() {
			b.spotWanted[t] = true
		}
	}
	if due && !now.Before(b.spotNext) {
		prices, err := p.readSpot(ctx, api, now)
		if err != nil {
			b.spotNext = now.Add(spotRetry)
			klog.FromContext(ctx).Error(err, "Reading Spot prices; Spot nodes are priced On-Demand until they are read", "retryIn", spotRetry)
		} else {
			b.spot, b.spotAt = prices, now
		}
	}
	zones := b.spot[typ]
	if v, ok := zones[zone]; ok {
		return v, true
	}
	cheapest, found := 0.0, false
	for _, v := range zones {
		if !found || v < cheapest {
			cheapest, found = v, true
		}
	}
	return cheapest, found
}

// groupTypes are the instance types the groups launch or run.
func (p *Provider) groupTypes() []string {
	var out []string
	for _, g := range p.current().groups {
		out = append(out, g.desc.MixedOverrides...)
		for _, in := range g.desc.Instances {
			if in.Type != "" {
				out = append(out, in.Type)
			}
		}
		g.mu.Lock()
		if g.template != nil {
			out = append(out, g.template.Labels[apiv1.LabelInstanceTypeStable])
		}
		g.mu.Unlock()
	}
	return out
}

// readSpot reads the latest Linux Spot price of every wanted type in every
// zone: the history from now on, which starts with the price in effect.
func (p *Provider) readSpot(ctx context.Context, api spotPriceAPI, now time.Time) (map[string]map[string]float64, error) {
	var types []string
	for t := range p.prices.spotWanted {
		if t != "" {
			types = append(types, t)
		}
	}
	sort.Strings(types)
	type seen struct {
		price float64
		at    time.Time
	}
	latest := map[[2]string]seen{}
	for start := 0; start < len(types); start += spotBatch {
		batch := types[start:min(start+spotBatch, len(types))]
		in := &ec2.DescribeSpotPriceHistoryInput{StartTime: aws.Time(now), ProductDescriptions: []string{linuxUnix}, MaxResults: aws.Int32(1000)}
		for _, t := range batch {
			in.InstanceTypes = append(in.InstanceTypes, ec2types.InstanceType(t))
		}
		pages := ec2.NewDescribeSpotPriceHistoryPaginator(api, in, func(o *ec2.DescribeSpotPriceHistoryPaginatorOptions) { o.StopOnDuplicateToken = true })
		for n := 0; pages.HasMorePages(); n++ {
			if n >= spotPages {
				return nil, fmt.Errorf("reading Spot prices: more than %d pages", spotPages)
			}
			page, err := pages.NextPage(ctx)
			if err != nil {
				return nil, callError("reading Spot prices (ec2:DescribeSpotPriceHistory)", err, true)
			}
			for _, h := range page.SpotPriceHistory {
				usd, err := strconv.ParseFloat(aws.ToString(h.SpotPrice), 64)
				if err != nil || usd <= 0 {
					continue
				}
				k := [2]string{string(h.InstanceType), aws.ToString(h.AvailabilityZone)}
				if old, ok := latest[k]; !ok || aws.ToTime(h.Timestamp).After(old.at) {
					latest[k] = seen{usd, aws.ToTime(h.Timestamp)}
				}
			}
		}
	}
	out := map[string]map[string]float64{}
	for k, v := range latest {
		if out[k[0]] == nil {
			out[k[0]] = map[string]float64{}
		}
		out[k[0]][k[1]] = v.price
	}
	return out, nil
}
