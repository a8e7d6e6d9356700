package awsfake

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// SpotPrice is one change of the Spot price of an instance type in a zone
// (DescribeSpotPriceHistory), in USD per hour.
type SpotPrice struct {
	InstanceType string
	Zone         string
	// Product is the product description; "" is "Linux/UNIX".
	Product string
	Price   float64
	At      time.Time
}

// AddSpotPrice records a Spot price change.
func (s *Server) AddSpotPrice(p SpotPrice) {
	if p.Product == "" {
		p.Product = "Linux/UNIX"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spotPrices = append(s.spotPrices, p)
}

type xmlSpotPrice struct {
	AvailabilityZone   string `xml:"availabilityZone"`
	InstanceType       string `xml:"instanceType"`
	ProductDescription string `xml:"productDescription"`
	SpotPrice          string `xml:"spotPrice"`
	Timestamp          string `xml:"timestamp"`
}

// ec2TimeFormat is the timestamp format of EC2 answers.
const ec2TimeFormat = "2006-01-02T15:04:05.000Z"

// describeSpotPriceHistory answers DescribeSpotPriceHistory: the price
// changes in [StartTime, EndTime] (EndTime defaults to now; no StartTime
// means the whole history) of the types, products and zone asked (by the
// parameters or the filters availability-zone, instance-type,
// product-description), and for each type, product and zone the last
// change before StartTime (the price in effect then); newest first,
// MaxResults (1-1000) a page.
func (s *Server) describeSpotPriceHistory(form url.Values) (any, *apiError) {
	invalid := func(f string, a ...any) *apiError { return ec2Error("InvalidParameterValue", f, a...) }
	limit, aerr := intParam(form, "MaxResults", 1000, 1, 1000, func(f string, a ...any) *apiError { return invalid(f, a...) })
	if aerr != nil {
		return nil, aerr
	}
	sets := map[string]map[string]bool{}
	add := func(name string, values []string) {
		if len(values) == 0 {
			return
		}
		if sets[name] == nil {
			sets[name] = map[string]bool{}
		}
		for _, v := range values {
			sets[name][v] = true
		}
	}
	add("instance-type", listParam(form, "InstanceType"))
	add("product-description", listParam(form, "ProductDescription"))
	if z := form.Get("AvailabilityZone"); z != "" {
		add("availability-zone", []string{z})
	}
	for i := 1; ; i++ {
		p := fmt.Sprintf("Filter.%d", i)
		name := form.Get(p + ".Name")
		if name == "" {
			break
		}
		switch name {
		case "instance-type", "product-description", "availability-zone":
			add(name, listParam(form, p+".Value"))
		default:
			return nil, invalid("The filter '%s' is invalid", name)
		}
	}
	parse := func(name string) (time.Time, *apiError) {
		raw := form.Get(name)
		if raw == "" {
			return time.Time{}, nil
		}
		t, err := time.Parse(time.RFC3339Nano, raw)
		if err != nil {
			return time.Time{}, invalid("Value (%s) for parameter %s is invalid.", raw, name)
		}
		return t, nil
	}
	start, aerr := parse("StartTime")
	if aerr != nil {
		return nil, aerr
	}
	end, aerr := parse("EndTime")
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	if end.IsZero() {
		end = s.now()
	}
	var hits []SpotPrice
	before := map[string]SpotPrice{} // type/product/zone -> last change before start
	for _, p := range s.spotPrices {
		if !within(sets["instance-type"], p.InstanceType) || !within(sets["product-description"], p.Product) ||
			!within(sets["availability-zone"], p.Zone) || p.At.After(end) {
			continue
		}
		if p.At.Before(start) {
			k := p.InstanceType + "/" + p.Product + "/" + p.Zone
			if b, ok := before[k]; !ok || p.At.After(b.At) {
				before[k] = p
			}
			continue
		}
		hits = append(hits, p)
	}
	s.mu.Unlock()
	for _, p := range before {
		hits = append(hits, p)
	}
	sort.SliceStable(hits, func(i, j int) bool {
		a, b := hits[i], hits[j]
		if !a.At.Equal(b.At) {
			return a.At.After(b.At)
		}
		return a.InstanceType+a.Zone+a.Product < b.InstanceType+b.Zone+b.Product
	})
	keys := make([]string, len(hits))
	for i := range hits {
		keys[i] = fmt.Sprintf("%09d", i)
	}
	page, next, aerr := paginate(keys, form.Get("NextToken"), limit, "InvalidNextToken")
	if aerr != nil {
		return nil, aerr
	}
	out := struct {
		Items     []xmlSpotPrice `xml:"spotPriceHistorySet>item"`
		NextToken string         `xml:"nextToken,omitempty"`
	}{NextToken: next}
	for _, k := range page {
		i, _ := strconv.Atoi(k)
		p := hits[i]
		out.Items = append(out.Items, xmlSpotPrice{AvailabilityZone: p.Zone, InstanceType: p.InstanceType, ProductDescription: p.Product,
			SpotPrice: strconv.FormatFloat(p.Price, 'f', 6, 64), Timestamp: p.At.UTC().Format(ec2TimeFormat)})
	}
	return out, nil
}

// within reports whether v is in set (an empty set holds everything).
func within(set map[string]bool, v string) bool {
	return len(set) == 0 || set[v] || set[strings.TrimSpace(v)]
}
