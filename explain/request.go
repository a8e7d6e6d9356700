package explain

// Outcomes of a check of a ProvisioningRequest's pods against the nodes
// the cluster has (check-capacity, and the first step of an atomic
// scale-up).
const (
	OutcomeBooked = "fits the current nodes, booked"
	OutcomeNoFit  = "does not fit the current nodes"
)

// MaxRequests is how many ProvisioningRequests one loop records conditions
// for.
const MaxRequests = 2000

// Condition is a condition the loop set on a ProvisioningRequest.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// RequestConditions are the conditions the loop set on one request.
type RequestConditions struct {
	Request    string      `json:"provisioningRequest"`
	Conditions []Condition `json:"conditions"`
}

// SetCondition records that the loop being recorded set condition c on
// ProvisioningRequest request ("namespace/name"); a later condition of the
// same type replaces an earlier one.
func (r *Recorder) SetCondition(request string, c Condition) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == nil {
		return
	}
	for i := range r.cur.Requests {
		rc := &r.cur.Requests[i]
		if rc.Request != request {
			continue
		}
		for j := range rc.Conditions {
			if rc.Conditions[j].Type == c.Type {
				rc.Conditions[j] = c
				return
			}
		}
		rc.Conditions = append(rc.Conditions, c)
		return
	}
	if len(r.cur.Requests) < MaxRequests {
		r.cur.Requests = append(r.cur.Requests, RequestConditions{Request: request, Conditions: []Condition{c}})
	}
}

// RequestConditions returns the conditions the last loop set on request.
func (r *Recorder) RequestConditions(request string) []Condition {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		return nil
	}
	for _, rc := range r.last.loop.Requests {
		if rc.Request == request {
			return rc.Conditions
		}
	}
	return nil
}
