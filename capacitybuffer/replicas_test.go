package capacitybuffer

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1 "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/apis/autoscaling.x-k8s.io/v1beta1"
)

// spec is a fluent builder of buffer specs for the tables below.
type spec v1.CapacityBufferSpec

func templateRef() *spec { return &spec{PodTemplateRef: &v1.LocalObjectRef{Name: "shape"}} }
func scalableRef() *spec {
	return &spec{ScalableRef: &v1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "web"}}
}
func (s *spec) replicas(n int32) *spec   { s.Replicas = ptr.To(n); return s }
func (s *spec) percentage(n int32) *spec { s.Percentage = ptr.To(n); return s }
func (s *spec) limits(kv ...string) *spec {
	s.Limits = apiv1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		s.Limits[apiv1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return s
}
func (s *spec) obj() v1.CapacityBufferSpec { return v1.CapacityBufferSpec(*s) }

func requests(kv ...string) apiv1.ResourceList {
	l := apiv1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[apiv1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func TestValidate(t *testing.T) {
	both := templateRef().replicas(1)
	both.ScalableRef = scalableRef().ScalableRef
	noName := &spec{PodTemplateRef: &v1.LocalObjectRef{}, Replicas: ptr.To[int32](1)}
	noKind := &spec{ScalableRef: &v1.ScalableRef{Name: "web"}, Replicas: ptr.To[int32](1)}
	for _, tc := range []struct {
		name string
		spec *spec
		want string // a piece of the message; "" for valid
	}{
		{"template with replicas", templateRef().replicas(3), ""},
		{"template with limits only", templateRef().limits("cpu", "4"), ""},
		{"template with zero replicas", templateRef().replicas(0), ""},
		{"scalable with percentage", scalableRef().percentage(10), ""},
		{"scalable with replicas", scalableRef().replicas(2), ""},
		{"scalable with limits only", scalableRef().limits("cpu", "4"), ""},
		{"template with percentage too (ignored later)", templateRef().replicas(1).percentage(50), ""},
		{"both references", both, "not both"},
		{"no reference", (&spec{}).replicas(1), "no pod shape"},
		{"template without a name", noName, "no name"},
		{"scalable without a kind", noKind, "kind and a name"},
		{"negative replicas", templateRef().replicas(-1), "replicas is -1"},
		{"negative percentage", scalableRef().percentage(-5), "percentage is -5"},
		{"template with nothing to count", templateRef(), "set replicas or limits"},
		{"template with only percentage", templateRef().percentage(10), "set replicas or limits"},
		{"scalable with nothing to count", scalableRef(), "set replicas, percentage or limits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Validate(tc.spec.obj())
			switch {
			case tc.want == "" && p != nil:
				t.Errorf("invalid: %v", p)
			case tc.want != "" && p == nil:
				t.Errorf("valid, want a problem mentioning %q", tc.want)
			case tc.want != "" && (p.Reason != ReasonInvalidSpec || !strings.Contains(p.Message, tc.want)):
				t.Errorf("problem %v, want reason %s mentioning %q", p, ReasonInvalidSpec, tc.want)
			}
		})
	}
}

func TestReplicas(t *testing.T) {
	oneCPU := requests("cpu", "1", "memory", "1Gi")
	for _, tc := range []struct {
		name     string
		spec     *spec
		requests apiv1.ResourceList
		scalable int32
		want     int32
		notes    []string
	}{
		{name: "replicas", spec: templateRef().replicas(3), requests: oneCPU, want: 3},
		{name: "zero replicas", spec: templateRef().replicas(0), requests: oneCPU, want: 0},
		{name: "percentage rounds up", spec: scalableRef().percentage(10), requests: oneCPU, scalable: 11, want: 2},
		{name: "percentage exact", spec: scalableRef().percentage(20), requests: oneCPU, scalable: 10, want: 2},
		{name: "percentage at least one", spec: scalableRef().percentage(1), requests: oneCPU, scalable: 3, want: 1},
		{name: "percentage of an empty target is one", spec: scalableRef().percentage(50), requests: oneCPU, scalable: 0, want: 1},
		{name: "zero percentage is none", spec: scalableRef().percentage(0), requests: oneCPU, scalable: 10, want: 0},
		{name: "percentage above 100", spec: scalableRef().percentage(250), requests: oneCPU, scalable: 4, want: 10},
		{name: "both: replicas larger", spec: scalableRef().replicas(5).percentage(10), requests: oneCPU, scalable: 10, want: 5},
		{name: "both: percentage larger", spec: scalableRef().replicas(1).percentage(50), requests: oneCPU, scalable: 10, want: 5},
		{name: "percentage without scalableRef is ignored", spec: templateRef().replicas(2).percentage(90), requests: oneCPU,
			scalable: 100, want: 2, notes: []string{"percentage is ignored without scalableRef"}},
		{name: "limits alone", spec: templateRef().limits("cpu", "10"), requests: oneCPU, want: 10},
		{name: "limits alone, fractional cpu", spec: templateRef().limits("cpu", "1"), requests: requests("cpu", "300m"), want: 3},
		{name: "limits alone, the tightest resource", spec: templateRef().limits("cpu", "10", "memory", "3Gi"), requests: oneCPU, want: 3},
		{name: "limits alone, less than one pod", spec: templateRef().limits("cpu", "500m"), requests: oneCPU, want: 0},
		{name: "limits cap replicas", spec: templateRef().replicas(8).limits("cpu", "5"), requests: oneCPU, want: 5,
			notes: []string{"8 chunks capped to 5 by limits on cpu"}},
		{name: "limits above replicas", spec: templateRef().replicas(2).limits("cpu", "5"), requests: oneCPU, want: 2},
		{name: "limits cap percentage", spec: scalableRef().percentage(100).limits("memory", "2Gi"), requests: oneCPU,
			scalable: 10, want: 2, notes: []string{"10 chunks capped to 2 by limits on memory"}},
		{name: "limits on a resource the pod does not request", spec: templateRef().replicas(4).limits("nvidia.com/gpu", "2"),
			requests: oneCPU, want: 4, notes: []string{"limits name nvidia.com/gpu, which a pod does not request: no cap"}},
		{name: "a zero request is not limited", spec: templateRef().replicas(4).limits("cpu", "1"),
			requests: requests("cpu", "0", "memory", "1Gi"), want: 4,
			notes: []string{"limits name cpu, which a pod does not request: no cap"}},
		{name: "huge limits", spec: templateRef().limits("memory", "100Ei"), requests: oneCPU, want: 2147483647},
		{name: "zero limits", spec: templateRef().replicas(3).limits("cpu", "0"), requests: oneCPU, want: 0,
			notes: []string{"3 chunks capped to 0 by limits on cpu"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, p := Replicas(tc.spec.obj(), tc.requests, tc.scalable)
			if p != nil {
				t.Fatalf("problem %v", p)
			}
			if diff := cmp.Diff(Count{Replicas: tc.want, Notes: tc.notes}, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestReplicasProblems(t *testing.T) {
	_, p := Replicas(templateRef().limits("nvidia.com/gpu", "2").obj(), requests("cpu", "1"), 0)
	if p == nil || p.Reason != ReasonInvalidSpec || !strings.Contains(p.Message, "none of which a pod of the buffer requests (it requests cpu)") {
		t.Errorf("limits alone on a resource not requested: problem %v", p)
	}
	_, p = Replicas(templateRef().limits("cpu", "2").obj(), nil, 0)
	if p == nil || !strings.Contains(p.Message, "it requests nothing") {
		t.Errorf("limits alone and a pod that requests nothing: problem %v", p)
	}
}

func TestPercentOf(t *testing.T) {
	for _, tc := range []struct{ percent, replicas, want int32 }{
		{10, 10, 1}, {10, 11, 2}, {33, 3, 1}, {34, 3, 2}, {100, 7, 7}, {1, 0, 1}, {0, 0, 0}, {-1, 10, 0},
		{100, -3, 1}, {1000, 2147483647, 2147483647},
	} {
		if got := PercentOf(tc.percent, tc.replicas); got != tc.want {
			t.Errorf("PercentOf(%d, %d) = %d, want %d", tc.percent, tc.replicas, got, tc.want)
		}
	}
}
