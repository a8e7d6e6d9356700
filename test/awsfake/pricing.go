package awsfake

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// The AWS Price List Query API (service "pricing") speaks JSON 1.1: a POST
// to / whose X-Amz-Target header names the operation
// (AWSPriceListService.<Operation>), a JSON body, a JSON answer; an error
// is a 4xx/5xx with {"__type": code, "Message": ...}. The fake serves
// GetProducts for the AmazonEC2 service code: one product per price added
// with AddOnDemandPrice, plus the products a careless client would pick up
// by mistake (Windows, Dedicated tenancy, unused capacity reservations), so
// that only the right filters give the Linux, shared-tenancy price.
const (
	svcPricing       = "pricing"
	pricingTarget    = "AWSPriceListService."
	pricingJSONType  = "application/x-amz-json-1.1"
	pricingMaxPage   = 100
	pricingTermCode  = "JRTCKXETXF" // the On-Demand offer term code
	pricingRateCode  = "6YS6EN2CT7" // the hourly rate of an On-Demand term
	pricingReserved  = "4NA7Y494T4" // a Reserved term (1 year, no upfront)
	pricingPublished = "2026-11-01T00:00:00Z"
)

// pricingRegions are the regions the Price List Query API has endpoints
// in: a request is signed for one of them, whatever region the rest of
// the fake serves.
var pricingRegions = map[string]bool{"us-east-1": true, "eu-central-1": true, "ap-south-1": true, "cn-northwest-1": true}

// OnDemandPrice is the On-Demand hourly price (USD) of an instance type in
// a region, for Linux on shared tenancy.
type OnDemandPrice struct {
	Region       string
	InstanceType string
	USDPerHour   float64
}

// pricingProduct is one product of the price list.
type pricingProduct struct {
	sku   string
	attrs map[string]string
	usd   float64
}

// AddOnDemandPrice adds (or replaces) the On-Demand price of a type in a
// region, with the products that differ from it only by operating system,
// tenancy or capacity status (at other prices).
func (s *Server) AddOnDemandPrice(p OnDemandPrice) {
	base := map[string]string{
		"servicecode": "AmazonEC2", "instanceType": p.InstanceType, "regionCode": p.Region, "operatingSystem": "Linux",
		"tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used", "licenseModel": "No License required",
		"operation": "RunInstances", "usagetype": "BoxUsage:" + p.InstanceType,
	}
	variant := func(usd float64, change map[string]string) pricingProduct {
		attrs := make(map[string]string, len(base))
		for k, v := range base {
			attrs[k] = v
		}
		for k, v := range change {
			attrs[k] = v
		}
		return pricingProduct{sku: skuOf(attrs), attrs: attrs, usd: usd}
	}
	products := []pricingProduct{
		variant(p.USDPerHour, nil),
		variant(p.USDPerHour*1.8+0.04, map[string]string{"operatingSystem": "Windows", "operation": "RunInstances:0002"}),
		variant(p.USDPerHour*1.1, map[string]string{"tenancy": "Dedicated", "usagetype": "DedicatedUsage:" + p.InstanceType}),
		variant(0, map[string]string{"capacitystatus": "UnusedCapacityReservation"}),
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.products == nil {
		s.products = map[string]pricingProduct{}
	}
	for _, pr := range products {
		s.products[pr.sku] = pr
	}
}

// skuOf is a stable SKU for a product's attributes: 16 upper-case letters
// and digits, as AWS's look.
func skuOf(attrs map[string]string) string {
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := fnv.New64a()
	for _, k := range keys {
		_, _ = h.Write([]byte(k + "=" + attrs[k] + ";"))
	}
	const alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	n := h.Sum64()
	var b strings.Builder
	for range 16 {
		b.WriteByte(alphabet[n%32])
		n = n/32 + 0x9E3779B97F4A7C15*(n%7)
	}
	return b.String()
}

// isPricingRequest tells a Price List request from the others.
func isPricingRequest(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("X-Amz-Target"), pricingTarget)
}

// pricingFilter is one Filters entry of GetProducts.
type pricingFilter struct {
	Type  string
	Field string
	Value string
}

type getProductsInput struct {
	ServiceCode   string
	Filters       []pricingFilter
	FormatVersion string
	NextToken     string
	MaxResults    *int
}

// servePricing answers a Price List request.
func (s *Server) servePricing(w http.ResponseWriter, r *http.Request) {
	reqID := newRequestID()
	action := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), pricingTarget)
	if r.Method != http.MethodPost {
		writePricingError(w, reqID, &apiError{status: http.StatusMethodNotAllowed, code: "UnknownOperationException", message: "only POST"})
		return
	}
	if aerr := s.checkPricingAuth(r.Header.Get("Authorization")); aerr != nil {
		writePricingError(w, reqID, aerr)
		return
	}
	if action != "GetProducts" {
		writePricingError(w, reqID, &apiError{status: http.StatusBadRequest, code: "UnknownOperationException",
			message: "The fake serves only GetProducts, not " + action})
		return
	}
	if aerr := s.countAndThrottle(action, svcPricing, isRetry(r.Header.Get("amz-sdk-request"))); aerr != nil {
		writePricingError(w, reqID, &apiError{status: http.StatusBadRequest, code: "ThrottlingException", message: "Rate exceeded"})
		return
	}
	s.mu.Lock()
	deny := s.deny[action]
	s.mu.Unlock()
	if deny {
		writePricingError(w, reqID, &apiError{status: http.StatusBadRequest, code: "AccessDeniedException",
			message: "User: arn:aws:sts::" + accountID + ":assumed-role/cluster-autoscaler/awsfake is not authorized to perform: pricing:" +
				action + " because no identity-based policy allows the pricing:" + action + " action"})
		return
	}
	s.runBeforeCall(action)
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var in getProductsInput
	if err == nil {
		err = json.Unmarshal(raw, &in)
	}
	if err != nil {
		writePricingError(w, reqID, &apiError{status: http.StatusBadRequest, code: "SerializationException", message: "malformed request body"})
		return
	}
	out, aerr := s.getProducts(in)
	if aerr != nil {
		writePricingError(w, reqID, aerr)
		return
	}
	body, _ := json.Marshal(out)
	w.Header().Set("Content-Type", pricingJSONType)
	w.Header().Set("x-amzn-RequestId", reqID)
	_, _ = w.Write(body)
}

// checkPricingAuth is checkAuth for the Price List API, whose endpoints
// are in a few regions only: a SigV4 Authorization header scoped to the
// service "pricing" in one of them (the signature is not verified).
func (s *Server) checkPricingAuth(header string) *apiError {
	if header == "" {
		return &apiError{status: http.StatusForbidden, code: "MissingAuthenticationTokenException", message: "Missing Authentication Token"}
	}
	rest, ok := strings.CutPrefix(header, "AWS4-HMAC-SHA256 ")
	i := strings.Index(rest, "Credential=")
	if !ok || i < 0 || !strings.Contains(rest, "Signature=") {
		return &apiError{status: http.StatusBadRequest, code: "IncompleteSignatureException", message: "Authorization header is incomplete."}
	}
	scope := strings.Split(strings.SplitN(rest[i+len("Credential="):], ",", 2)[0], "/")
	if len(scope) != 5 || scope[4] != "aws4_request" {
		return &apiError{status: http.StatusBadRequest, code: "IncompleteSignatureException", message: "Credential must have exactly 5 slash-delimited elements"}
	}
	if !pricingRegions[scope[2]] {
		return &apiError{status: http.StatusForbidden, code: "InvalidSignatureException",
			message: fmt.Sprintf("The Price List API has no endpoint in '%s'.", scope[2])}
	}
	if scope[3] != svcPricing {
		return &apiError{status: http.StatusForbidden, code: "InvalidSignatureException",
			message: fmt.Sprintf("Credential should be scoped to correct service: '%s'.", svcPricing)}
	}
	return nil
}

// getProducts answers GetProducts: the products of the service that match
// every filter, sorted by SKU, MaxResults (1-100) a page.
func (s *Server) getProducts(in getProductsInput) (any, *apiError) {
	invalid := func(f string, a ...any) *apiError {
		return &apiError{status: http.StatusBadRequest, code: "InvalidParameterException", message: fmt.Sprintf(f, a...)}
	}
	if in.ServiceCode == "" {
		return nil, invalid("1 validation error detected: Value null at 'serviceCode' failed to satisfy constraint: Member must not be null")
	}
	if in.FormatVersion != "" && in.FormatVersion != "aws_v1" {
		return nil, invalid("Invalid FormatVersion: %s", in.FormatVersion)
	}
	limit := pricingMaxPage
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > pricingMaxPage {
			return nil, invalid("MaxResults must be between 1 and %d", pricingMaxPage)
		}
		limit = *in.MaxResults
	}
	for _, f := range in.Filters {
		switch f.Type {
		case "TERM_MATCH", "EQUALS", "CONTAINS", "ANY_OF", "NONE_OF":
		default:
			return nil, invalid("Invalid filter type: %s", f.Type)
		}
		if f.Field == "" {
			return nil, invalid("Filter field must not be empty")
		}
	}
	s.mu.Lock()
	var keys []string
	matched := map[string]pricingProduct{}
	for sku, p := range s.products {
		if !strings.EqualFold(p.attrs["servicecode"], in.ServiceCode) || !matchesAll(p.attrs, in.Filters) {
			continue
		}
		keys = append(keys, sku)
		matched[sku] = p
	}
	s.mu.Unlock()
	if in.ServiceCode != "AmazonEC2" {
		return nil, &apiError{status: http.StatusBadRequest, code: "NotFoundException", message: "Service code not found: " + in.ServiceCode}
	}
	sort.Strings(keys)
	page, next, aerr := paginate(keys, in.NextToken, limit, "InvalidNextTokenException")
	if aerr != nil {
		return nil, aerr
	}
	out := struct {
		FormatVersion string   `json:"FormatVersion"`
		NextToken     string   `json:"NextToken,omitempty"`
		PriceList     []string `json:"PriceList"`
	}{FormatVersion: "aws_v1", NextToken: next, PriceList: []string{}}
	for _, sku := range page {
		doc, err := json.Marshal(renderProduct(matched[sku]))
		if err != nil {
			return nil, &apiError{status: http.StatusInternalServerError, code: "InternalErrorException", message: err.Error()}
		}
		out.PriceList = append(out.PriceList, string(doc))
	}
	return out, nil
}

// matchesAll reports whether a product's attributes pass every filter
// (the field "ServiceCode" is the product's service code).
func matchesAll(attrs map[string]string, filters []pricingFilter) bool {
	for _, f := range filters {
		field := f.Field
		if strings.EqualFold(field, "ServiceCode") {
			field = "servicecode"
		}
		v, ok := attrs[field]
		switch f.Type {
		case "TERM_MATCH", "EQUALS":
			if !ok || !strings.EqualFold(v, f.Value) {
				return false
			}
		case "CONTAINS":
			if !ok || !strings.Contains(strings.ToLower(v), strings.ToLower(f.Value)) {
				return false
			}
		case "ANY_OF", "NONE_OF":
			in := false
			for _, want := range strings.Split(f.Value, ",") {
				in = in || (ok && strings.EqualFold(strings.TrimSpace(want), v))
			}
			if in != (f.Type == "ANY_OF") {
				return false
			}
		}
	}
	return true
}

// renderProduct is a product's price list document (format aws_v1): its
// attributes, an On-Demand term with the hourly price and a Reserved term
// at a lower one.
func renderProduct(p pricingProduct) map[string]any {
	attrs := map[string]string{}
	for k, v := range p.attrs {
		if k != "servicecode" {
			attrs[k] = v
		}
	}
	attrs["servicecode"] = p.attrs["servicecode"]
	dim := func(code, unit string, usd float64, desc string) map[string]any {
		return map[string]any{code: map[string]any{"unit": unit, "endRange": "Inf", "beginRange": "0", "appliesTo": []string{},
			"rateCode": code, "description": desc, "pricePerUnit": map[string]string{"USD": strconv.FormatFloat(usd, 'f', 10, 64)}}}
	}
	od := p.sku + "." + pricingTermCode
	ri := p.sku + "." + pricingReserved
	return map[string]any{
		"product":     map[string]any{"productFamily": "Compute Instance", "attributes": attrs, "sku": p.sku},
		"serviceCode": p.attrs["servicecode"],
		"terms": map[string]any{
			"OnDemand": map[string]any{od: map[string]any{
				"priceDimensions": dim(od+"."+pricingRateCode, "Hrs", p.usd,
					fmt.Sprintf("$%.4f per On Demand %s %s Instance Hour", p.usd, p.attrs["operatingSystem"], p.attrs["instanceType"])),
				"sku": p.sku, "effectiveDate": pricingPublished, "offerTermCode": pricingTermCode, "termAttributes": map[string]string{}}},
			"Reserved": map[string]any{ri: map[string]any{
				"priceDimensions": dim(ri+"."+pricingRateCode, "Hrs", p.usd*0.62, "Reserved, 1 year, no upfront"),
				"sku":             p.sku, "effectiveDate": pricingPublished, "offerTermCode": pricingReserved,
				"termAttributes": map[string]string{"LeaseContractLength": "1yr", "OfferingClass": "standard", "PurchaseOption": "No Upfront"}}},
		},
		"version":         "20261101000000",
		"publicationDate": pricingPublished,
	}
}

// writePricingError writes a JSON 1.1 error.
func writePricingError(w http.ResponseWriter, reqID string, e *apiError) {
	out, _ := json.Marshal(struct {
		Type    string `json:"__type"`
		Message string `json:"Message"`
	}{e.code, e.message})
	w.Header().Set("Content-Type", pricingJSONType)
	w.Header().Set("x-amzn-RequestId", reqID)
	w.Header().Set("X-Amzn-ErrorType", e.code)
	w.WriteHeader(e.status)
	_, _ = w.Write(out)
}
