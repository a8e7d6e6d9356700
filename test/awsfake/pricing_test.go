package awsfake

import (
	"encoding/json"
	"sort"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	ptypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
)

// pricingClient is the SDK's Price List client pointed at the fake, in the
// region the Price List API has its endpoint.
func pricingClient(t *testing.T, s *Server, region string, opts ...func(*config.LoadOptions) error) *pricing.Client {
	t.Helper()
	sdkClients(t, s) // sets the environment
	cfg, err := config.LoadDefaultConfig(t.Context(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return pricing.NewFromConfig(cfg, func(o *pricing.Options) { o.Region = region })
}

// onDemandOf reads the hourly On-Demand USD price out of a price list
// document, as a client of the real API does.
func onDemandOf(t *testing.T, doc string) (string, float64) {
	t.Helper()
	var p struct {
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
	if err := json.Unmarshal([]byte(doc), &p); err != nil {
		t.Fatalf("price list document: %v", err)
	}
	for _, term := range p.Terms.OnDemand {
		for _, d := range term.PriceDimensions {
			f, err := strconv.ParseFloat(d.PricePerUnit["USD"], 64)
			if err != nil || d.Unit != "Hrs" {
				t.Fatalf("price dimension %+v", d)
			}
			return p.Product.Attributes["instanceType"], f
		}
	}
	t.Fatalf("no On-Demand term in %s", doc)
	return "", 0
}

func linuxFilters(region string) []ptypes.Filter {
	f := func(k, v string) ptypes.Filter {
		return ptypes.Filter{Type: ptypes.FilterTypeTermMatch, Field: aws.String(k), Value: aws.String(v)}
	}
	return []ptypes.Filter{f("regionCode", region), f("operatingSystem", "Linux"), f("tenancy", "Shared"),
		f("preInstalledSw", "NA"), f("capacitystatus", "Used")}
}

func TestGetProducts(t *testing.T) {
	s := startFake(t)
	s.AddOnDemandPrice(OnDemandPrice{Region: "us-east-1", InstanceType: "m5.large", USDPerHour: 0.096})
	s.AddOnDemandPrice(OnDemandPrice{Region: "us-east-1", InstanceType: "c5.xlarge", USDPerHour: 0.17})
	s.AddOnDemandPrice(OnDemandPrice{Region: "eu-west-1", InstanceType: "m5.large", USDPerHour: 0.107})
	c := pricingClient(t, s, "us-east-1")

	// The filters select one product per type; paging by 1 walks them all.
	pages := pricing.NewGetProductsPaginator(c, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"),
		Filters: linuxFilters("us-east-1"), FormatVersion: aws.String("aws_v1"), MaxResults: aws.Int32(1)})
	got := map[string]float64{}
	n := 0
	for pages.HasMorePages() {
		out, err := pages.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		n++
		for _, doc := range out.PriceList {
			typ, usd := onDemandOf(t, doc)
			if _, dup := got[typ]; dup {
				t.Errorf("type %s listed twice", typ)
			}
			got[typ] = usd
		}
	}
	if n != 2 || len(got) != 2 || got["m5.large"] != 0.096 || got["c5.xlarge"] != 0.17 {
		t.Errorf("got %v in %d pages, want m5.large 0.096 and c5.xlarge 0.17 in 2", got, n)
	}

	// Without the filters the other products come too (Windows, Dedicated,
	// capacity reservations, other regions).
	out, err := c.GetProducts(t.Context(), &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2")})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.PriceList) != 12 {
		t.Errorf("unfiltered: %d products, want 12", len(out.PriceList))
	}
	var prices []float64
	for _, doc := range out.PriceList {
		if typ, usd := onDemandOf(t, doc); typ == "m5.large" {
			prices = append(prices, usd)
		}
	}
	sort.Float64s(prices)
	if len(prices) != 8 {
		t.Errorf("m5.large prices %v, want 8 products", prices)
	}
}

func TestGetProductsErrors(t *testing.T) {
	s := startFake(t, WithRegion("eu-west-1"))
	c := pricingClient(t, s, "us-east-1", noRetries)
	if _, err := c.GetProducts(t.Context(), &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), MaxResults: aws.Int32(101)}); apiErrorCode(err) != "InvalidParameterException" {
		t.Errorf("MaxResults 101: %v, want InvalidParameterException", err)
	}
	if _, err := c.GetProducts(t.Context(), &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), NextToken: aws.String("bogus")}); apiErrorCode(err) != "InvalidNextTokenException" {
		t.Errorf("bad token: %v, want InvalidNextTokenException", err)
	}
	s.Deny("GetProducts")
	if _, err := c.GetProducts(t.Context(), &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2")}); apiErrorCode(err) != "AccessDeniedException" {
		t.Errorf("denied: %v, want AccessDeniedException", err)
	}
	s.Deny()
	// The API has endpoints in a few regions only: the fake's own region
	// (eu-west-1) is not one.
	other := pricingClient(t, s, "eu-west-1", noRetries)
	if _, err := other.GetProducts(t.Context(), &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2")}); apiErrorCode(err) != "InvalidSignatureException" {
		t.Errorf("signed for eu-west-1: %v, want InvalidSignatureException", err)
	}
	if got := s.Calls()["GetProducts"]; got != 3 {
		t.Errorf("%d GetProducts calls counted, want 3 (a refused signature is not a call)", got)
	}
}
