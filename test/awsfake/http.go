package awsfake

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Service names as they appear in a SigV4 credential scope, and the API
// versions and XML namespaces of the two services.
const (
	svcAutoScaling = "autoscaling"
	svcEC2         = "ec2"

	versionAutoScaling = "2011-01-01"
	versionEC2         = "2016-11-15"

	xmlnsAutoScaling = "http://autoscaling.amazonaws.com/doc/2011-01-01/"
	xmlnsEC2         = "http://ec2.amazonaws.com/doc/2016-11-15/"
)

// apiError is an error answer: HTTP status, AWS error code and message.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

// validationError is Auto Scaling's 400 ValidationError.
func validationError(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: "ValidationError", message: fmt.Sprintf(format, args...)}
}

// ec2Error is a 400 EC2 error with the given code.
func ec2Error(code, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: code, message: fmt.Sprintf(format, args...)}
}

// handler answers one action: a response body to marshal inside the
// service's envelope, or an error.
type handler func(s *Server, form url.Values) (any, *apiError)

// actions maps each service's action names to handlers.
var actions = map[string]map[string]handler{
	svcAutoScaling: {
		"DescribeAutoScalingGroups":           (*Server).describeAutoScalingGroups,
		"SetDesiredCapacity":                  (*Server).setDesiredCapacity,
		"TerminateInstanceInAutoScalingGroup": (*Server).terminateInstanceInAutoScalingGroup,
		"DescribeScalingActivities":           (*Server).describeScalingActivities,
		"DescribeLaunchConfigurations":        (*Server).describeLaunchConfigurations,
		"DescribeAutoScalingInstances":        (*Server).describeAutoScalingInstances,
		"SetInstanceProtection":               (*Server).setInstanceProtection,
	},
	svcEC2: {
		"DescribeInstanceTypes":                    (*Server).describeInstanceTypes,
		"DescribeLaunchTemplateVersions":           (*Server).describeLaunchTemplateVersions,
		"DescribeLaunchTemplates":                  (*Server).describeLaunchTemplates,
		"CreateLaunchTemplateVersion":              (*Server).createLaunchTemplateVersion,
		"ModifyLaunchTemplate":                     (*Server).modifyLaunchTemplate,
		"DescribeSubnets":                          (*Server).describeSubnets,
		"DescribeImages":                           (*Server).describeImages,
		"GetInstanceTypesFromInstanceRequirements": (*Server).getInstanceTypesFromInstanceRequirements,
		"DescribeSpotPriceHistory":                 (*Server).describeSpotPriceHistory,     // spotprice.go
		"DescribeCapacityReservations":             (*Server).describeCapacityReservations, // reservations.go
		"DescribeInstances":                        (*Server).describeInstances,            // spotprice_instances.go
	},
}

// serviceOf tells which service a request is for: by action name, else by
// the form's Version (Auto Scaling when neither says).
func serviceOf(action, version string) string {
	if _, ok := actions[svcEC2][action]; ok {
		return svcEC2
	}
	if _, ok := actions[svcAutoScaling][action]; ok {
		return svcAutoScaling
	}
	if version == versionEC2 {
		return svcEC2
	}
	return svcAutoScaling
}

// serveHTTP is the query-protocol entry point.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if isEKSPath(r.URL.Path) {
		s.serveEKS(w, r) // REST-JSON (eks.go)
		return
	}
	if isPricingRequest(r) {
		s.servePricing(w, r) // JSON 1.1 (pricing.go)
		return
	}
	if isSQS(r) {
		s.serveSQS(w, r) // JSON 1.0 (sqs.go)
		return
	}
	reqID := newRequestID()
	if r.Method != http.MethodPost {
		writeError(w, svcAutoScaling, reqID, &apiError{status: http.StatusMethodNotAllowed,
			code: "InvalidAction", message: "only POST is supported"})
		return
	}
	if err := r.ParseForm(); err != nil {
		writeError(w, svcAutoScaling, reqID, &apiError{status: http.StatusBadRequest,
			code: "MalformedQueryString", message: err.Error()})
		return
	}
	action := r.PostForm.Get("Action")
	svc := serviceOf(action, r.PostForm.Get("Version"))
	if aerr := s.checkAuth(r.Header.Get("Authorization"), svc); aerr != nil {
		writeError(w, svc, reqID, aerr)
		return
	}
	h, ok := actions[svc][action]
	if !ok {
		writeError(w, svc, reqID, &apiError{status: http.StatusBadRequest, code: "InvalidAction",
			message: fmt.Sprintf("The action %q is not valid for this web service.", action)})
		return
	}
	if aerr := s.countAndThrottle(action, svc, isRetry(r.Header.Get("amz-sdk-request"))); aerr != nil {
		writeError(w, svc, reqID, aerr)
		return
	}
	if aerr := s.denied(svc, action); aerr != nil {
		writeError(w, svc, reqID, aerr)
		return
	}
	s.runBeforeCall(action)
	body, aerr := h(s, r.PostForm)
	if aerr != nil {
		writeError(w, svc, reqID, aerr)
		return
	}
	writeResult(w, svc, action, reqID, body)
}

// isRetry reads the SDK's amz-sdk-request header ("attempt=2; max=3"):
// whether the call repeats an earlier attempt.
func isRetry(header string) bool {
	for _, part := range strings.Split(header, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if ok && k == "attempt" {
			n, err := strconv.Atoi(v)
			return err == nil && n > 1
		}
	}
	return false
}

// countAndThrottle counts the call and decides whether to throttle it.
func (s *Server) countAndThrottle(action, svc string, retry bool) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[action]++
	if retry {
		s.retries[action]++
	}
	s.throttleAcc += s.throttle
	if s.throttleAcc < 100 {
		return nil
	}
	s.throttleAcc -= 100
	s.throttled++
	if svc == svcEC2 {
		return &apiError{status: http.StatusServiceUnavailable, code: "RequestLimitExceeded", message: "Request limit exceeded."}
	}
	return &apiError{status: http.StatusBadRequest, code: "Throttling", message: "Rate exceeded"}
}

// checkAuth checks that the request carries a SigV4 Authorization header
// scoped to the server's region and the service; the signature is not
// verified.
func (s *Server) checkAuth(header, svc string) *apiError {
	if header == "" {
		return &apiError{status: http.StatusForbidden, code: "MissingAuthenticationToken",
			message: "Request is missing Authentication Token"}
	}
	rest, ok := strings.CutPrefix(header, "AWS4-HMAC-SHA256 ")
	if !ok {
		return &apiError{status: http.StatusBadRequest, code: "IncompleteSignature",
			message: "Authorization header requires the AWS4-HMAC-SHA256 algorithm."}
	}
	parts := map[string]string{}
	for _, p := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		parts[k] = v
	}
	for _, k := range []string{"Credential", "SignedHeaders", "Signature"} {
		if parts[k] == "" {
			return &apiError{status: http.StatusBadRequest, code: "IncompleteSignature",
				message: fmt.Sprintf("Authorization header requires '%s' parameter.", k)}
		}
	}
	scope := strings.Split(parts["Credential"], "/")
	if len(scope) != 5 || scope[4] != "aws4_request" || scope[0] == "" {
		return &apiError{status: http.StatusBadRequest, code: "IncompleteSignature",
			message: "Credential must have exactly 5 slash-delimited elements, e.g. keyid/date/region/service/term"}
	}
	if scope[2] != s.region {
		return &apiError{status: http.StatusForbidden, code: "SignatureDoesNotMatch",
			message: fmt.Sprintf("Credential should be scoped to a valid region, not '%s'.", scope[2])}
	}
	if scope[3] != svc {
		return &apiError{status: http.StatusForbidden, code: "SignatureDoesNotMatch",
			message: fmt.Sprintf("Credential should be scoped to correct service: '%s'.", svc)}
	}
	return nil
}

// writeResult writes a successful answer. Auto Scaling wraps the result in
// <Action>Response/<Action>Result with ResponseMetadata; EC2 puts the fields
// directly in <Action>Response next to a requestId.
func writeResult(w http.ResponseWriter, svc, action, reqID string, body any) {
	var doc xml.Marshaler = asgDoc{action: action, reqID: reqID, body: body}
	if svc == svcEC2 {
		doc = ec2Doc{action: action, reqID: reqID, body: body}
	}
	out, err := xml.Marshal(doc)
	if err != nil {
		writeError(w, svc, reqID, &apiError{status: http.StatusInternalServerError, code: "InternalFailure", message: err.Error()})
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("x-amzn-RequestId", reqID)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(out)
}

// asgDoc is an Auto Scaling answer document.
type asgDoc struct {
	action, reqID string
	body          any
}

// MarshalXML writes <Action>Response, its <Action>Result and ResponseMetadata.
func (d asgDoc) MarshalXML(e *xml.Encoder, _ xml.StartElement) error {
	start := xml.StartElement{Name: xml.Name{Local: d.action + "Response"},
		Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: xmlnsAutoScaling}}}
	if err := e.EncodeToken(start); err != nil {
		return err
	}
	if d.body != nil {
		if err := e.EncodeElement(d.body, xml.StartElement{Name: xml.Name{Local: d.action + "Result"}}); err != nil {
			return err
		}
	}
	meta := struct {
		RequestID string `xml:"RequestId"`
	}{d.reqID}
	if err := e.EncodeElement(meta, xml.StartElement{Name: xml.Name{Local: "ResponseMetadata"}}); err != nil {
		return err
	}
	return e.EncodeToken(start.End())
}

// ec2Doc is an EC2 answer document.
type ec2Doc struct {
	action, reqID string
	body          any
}

// MarshalXML writes <Action>Response holding requestId and the body's fields.
func (d ec2Doc) MarshalXML(e *xml.Encoder, _ xml.StartElement) error {
	start := xml.StartElement{Name: xml.Name{Local: d.action + "Response"},
		Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: xmlnsEC2}}}
	if err := e.EncodeToken(start); err != nil {
		return err
	}
	if err := e.EncodeElement(d.reqID, xml.StartElement{Name: xml.Name{Local: "requestId"}}); err != nil {
		return err
	}
	if d.body != nil {
		// The body's fields, without an element of its own: encode it
		// under a throw-away name, then keep only its children.
		if err := encodeChildren(e, d.body); err != nil {
			return err
		}
	}
	return e.EncodeToken(start.End())
}

// writeError writes an error in the service's envelope.
func writeError(w http.ResponseWriter, svc, reqID string, e *apiError) {
	var doc any
	if svc == svcEC2 {
		doc = struct {
			XMLName   xml.Name `xml:"Response"`
			Code      string   `xml:"Errors>Error>Code"`
			Message   string   `xml:"Errors>Error>Message"`
			RequestID string   `xml:"RequestID"`
		}{Code: e.code, Message: e.message, RequestID: reqID}
	} else {
		typ := "Sender"
		if e.status >= 500 {
			typ = "Receiver"
		}
		doc = struct {
			XMLName   xml.Name `xml:"ErrorResponse"`
			Xmlns     string   `xml:"xmlns,attr"`
			Type      string   `xml:"Error>Type"`
			Code      string   `xml:"Error>Code"`
			Message   string   `xml:"Error>Message"`
			RequestID string   `xml:"RequestId"`
		}{Xmlns: xmlnsAutoScaling, Type: typ, Code: e.code, Message: e.message, RequestID: reqID}
	}
	out, _ := xml.Marshal(doc)
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("x-amzn-RequestId", reqID)
	w.WriteHeader(e.status)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(out)
}

// newRequestID returns a request ID shaped like a UUID.
func newRequestID() string {
	h := randomHex(32)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// encodeChildren writes the child elements of v's XML form (not v's own
// element) to e.
func encodeChildren(e *xml.Encoder, v any) error {
	raw, err := xml.Marshal(struct {
		XMLName xml.Name `xml:"x"`
		V       any
	}{V: v})
	if err != nil {
		return err
	}
	d := xml.NewDecoder(bytes.NewReader(raw))
	depth := 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch tok.(type) {
		case xml.StartElement:
			depth++
		case xml.EndElement:
			depth--
		}
		// depth 1 is the wrapper, 2 is v's own element.
		_, isEnd := tok.(xml.EndElement)
		if depth > 2 || (depth == 2 && isEnd) {
			if err := e.EncodeToken(xml.CopyToken(tok)); err != nil {
				return err
			}
		}
	}
}
