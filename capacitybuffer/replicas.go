package capacitybuffer

import (
	"fmt"
	"math"
	"slices"
	"strings"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/apis/autoscaling.x-k8s.io/v1beta1"
)

// Problem is why a buffer cannot be provisioned: a condition reason and a
// message for the user.
type Problem struct {
	Reason  string
	Message string
}

func (p *Problem) Error() string { return p.Reason + ": " + p.Message }

func invalid(format string, args ...any) *Problem {
	return &Problem{Reason: ReasonInvalidSpec, Message: fmt.Sprintf(format, args...)}
}

// Validate checks what the spec says on its own, before any object it names
// is read. The CRD's schema rejects most of these on create; the controller
// checks again for objects written under a looser schema.
func Validate(spec v1.CapacityBufferSpec) *Problem {
	switch {
	case spec.PodTemplateRef != nil && spec.ScalableRef != nil:
		return invalid("set either podTemplateRef or scalableRef, not both")
	case spec.PodTemplateRef == nil && spec.ScalableRef == nil:
		return invalid("set podTemplateRef or scalableRef: the buffer has no pod shape")
	case spec.PodTemplateRef != nil && spec.PodTemplateRef.Name == "":
		return invalid("podTemplateRef has no name")
	case spec.ScalableRef != nil && (spec.ScalableRef.Kind == "" || spec.ScalableRef.Name == ""):
		return invalid("scalableRef needs a kind and a name")
	case spec.Replicas != nil && *spec.Replicas < 0:
		return invalid("replicas is %d; it must not be negative", *spec.Replicas)
	case spec.Percentage != nil && *spec.Percentage < 0:
		return invalid("percentage is %d; it must not be negative", *spec.Percentage)
	case spec.PodTemplateRef != nil && spec.Replicas == nil && spec.Limits == nil:
		return invalid("with podTemplateRef, set replicas or limits")
	case spec.ScalableRef != nil && spec.Replicas == nil && spec.Percentage == nil && spec.Limits == nil:
		return invalid("set replicas, percentage or limits")
	}
	return nil
}

// Count is the number of chunks a buffer asks for, with notes on how it was
// reached (for the ReadyForProvisioning message).
type Count struct {
	Replicas int32
	Notes    []string
}

// Replicas computes the number of chunks of a valid spec: replicas, or
// percentage of scalableReplicas (rounded up, at least one when the
// percentage is above zero), the larger when both are set; then capped by
// limits, where each limited resource that the pod requests allows
// floor(limit / request) chunks. With neither replicas nor percentage, the
// limits alone decide. podRequests are one chunk's requests; scalableReplicas
// counts only with a scalableRef.
func Replicas(spec v1.CapacityBufferSpec, podRequests apiv1.ResourceList, scalableReplicas int32) (Count, *Problem) {
	var c Count
	counted := false
	if spec.Replicas != nil {
		c.Replicas, counted = *spec.Replicas, true
	}
	if spec.Percentage != nil {
		if spec.ScalableRef == nil {
			c.Notes = append(c.Notes, "percentage is ignored without scalableRef")
		} else {
			fromPercent := PercentOf(*spec.Percentage, scalableReplicas)
			if !counted || fromPercent > c.Replicas {
				c.Replicas = fromPercent
			}
			counted = true
		}
	}
	if spec.Limits == nil {
		return c, nil
	}
	capped, limited := chunksWithin(spec.Limits, podRequests)
	switch {
	case len(limited) == 0 && !counted:
		return Count{}, invalid("limits name %s, none of which a pod of the buffer requests (it requests %s)",
			resourceNames(spec.Limits), resourceNames(podRequests))
	case len(limited) == 0:
		c.Notes = append(c.Notes, fmt.Sprintf("limits name %s, which a pod does not request: no cap", resourceNames(spec.Limits)))
	case !counted:
		c.Replicas = capped
	case capped < c.Replicas:
		c.Notes = append(c.Notes, fmt.Sprintf("%d chunks capped to %d by limits on %s", c.Replicas, capped, strings.Join(limited, ", ")))
		c.Replicas = capped
	}
	return c, nil
}

// PercentOf is percent of replicas, rounded up, and at least one when
// percent is above zero.
func PercentOf(percent, replicas int32) int32 {
	if percent <= 0 {
		return 0
	}
	n := (int64(percent)*int64(max(replicas, 0)) + 99) / 100
	return int32(min(max(n, 1), math.MaxInt32))
}

// chunksWithin returns how many pods of requests fit within limits, over the
// limited resources the pod requests (named in the second result, sorted).
func chunksWithin(limits, requests apiv1.ResourceList) (int32, []string) {
	n := int64(math.MaxInt32)
	var limited []string
	for name, limit := range limits {
		req, ok := requests[name]
		if !ok || req.Sign() <= 0 {
			continue
		}
		limited = append(limited, string(name))
		n = min(n, quotient(limit, req))
	}
	slices.Sort(limited)
	return int32(max(n, 0)), limited
}

// quotient is floor(limit / request) for a positive request, in milli-units
// so that fractional cpu counts exactly; a limit too large for that is no cap.
func quotient(limit, request resource.Quantity) int64 {
	if limit.Sign() <= 0 {
		return 0
	}
	const most = math.MaxInt64 / 1000
	if limit.CmpInt64(most) > 0 {
		return math.MaxInt32
	}
	if request.CmpInt64(most) > 0 {
		return 0
	}
	return limit.MilliValue() / request.MilliValue()
}

func resourceNames(l apiv1.ResourceList) string {
	if len(l) == 0 {
		return "nothing"
	}
	names := make([]string, 0, len(l))
	for n := range l {
		names = append(names, string(n))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
