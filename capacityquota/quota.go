package capacityquota

import (
	"errors"
	"fmt"
	"math"
	"sort"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Quota is a validated CapacityQuota, in the units scale-up counts in.
type Quota struct {
	Name     string
	Selector labels.Selector
	// Limits are in milli-units (a node counts 1000 of NodesResource), so
	// that CPU, memory and extended resources share one arithmetic.
	Limits map[apiv1.ResourceName]int64
}

// Parse validates q and returns its Quota. Every problem is reported, so
// that the event on the object names them all.
func Parse(q *CapacityQuota) (Quota, error) {
	out := Quota{Name: q.Name, Selector: labels.Everything(), Limits: map[apiv1.ResourceName]int64{}}
	var errs []error
	if q.Spec.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(q.Spec.Selector)
		if err != nil {
			errs = append(errs, fmt.Errorf("spec.selector: %w", err))
		} else {
			out.Selector = sel
		}
	}
	if len(q.Spec.Limits.Resources) == 0 {
		errs = append(errs, errors.New("spec.limits.resources is empty: the quota limits nothing"))
	}
	names := make([]string, 0, len(q.Spec.Limits.Resources))
	for name := range q.Spec.Limits.Resources {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, name := range names {
		v := q.Spec.Limits.Resources[apiv1.ResourceName(name)]
		switch {
		case v.Sign() < 0:
			errs = append(errs, fmt.Errorf("spec.limits.resources[%s]: %s is negative", name, v.String()))
		case v.CmpInt64(math.MaxInt64/1000) > 0:
			errs = append(errs, fmt.Errorf("spec.limits.resources[%s]: %s is too large", name, v.String()))
		default:
			out.Limits[apiv1.ResourceName(name)] = v.MilliValue()
		}
	}
	if len(errs) > 0 {
		return Quota{}, errors.Join(errs...)
	}
	return out, nil
}

// Applies reports whether the quota counts node (a real node, or a node
// group's template).
func (q Quota) Applies(node *apiv1.Node) bool {
	return q.Selector.Matches(labels.Set(node.Labels))
}

// Amount is how much of resource a node adds, in milli-units: 1000 of
// NodesResource, its capacity of anything else.
func Amount(node *apiv1.Node, resource apiv1.ResourceName) int64 {
	if resource == NodesResource {
		return 1000
	}
	v, ok := node.Status.Capacity[resource]
	if !ok {
		return 0
	}
	return v.MilliValue()
}
