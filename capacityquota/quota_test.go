package capacityquota

import (
	"strings"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func TestParse(t *testing.T) {
	node := func(labels map[string]string) *apiv1.Node {
		return &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Status: apiv1.NodeStatus{Capacity: apiv1.ResourceList{
			apiv1.ResourceCPU: resource.MustParse("1500m"), apiv1.ResourceMemory: resource.MustParse("2Gi")}}}
	}
	for _, tc := range []struct {
		name, yaml string
		err        string
		check      func(t *testing.T, q Quota)
	}{
		{name: "selector and limits", yaml: `
metadata: {name: e2}
spec:
  selector: {matchLabels: {family: e2}}
  limits: {resources: {cpu: 64, memory: 256Gi, nodes: 10}}`,
			check: func(t *testing.T, q Quota) {
				if q.Limits["cpu"] != 64000 || q.Limits["nodes"] != 10000 || q.Limits["memory"] != 256<<30*1000 {
					t.Errorf("limits %v", q.Limits)
				}
				if !q.Applies(node(map[string]string{"family": "e2"})) || q.Applies(node(map[string]string{"family": "n2"})) {
					t.Error("selector not applied")
				}
			}},
		{name: "no selector: every node", yaml: `
metadata: {name: all}
spec: {limits: {resources: {cpu: "100"}}}`,
			check: func(t *testing.T, q Quota) {
				if !q.Applies(node(nil)) {
					t.Error("a quota without selector must apply to every node")
				}
			}},
		{name: "expressions", yaml: `
metadata: {name: no-cp}
spec:
  selector: {matchExpressions: [{key: node-role.kubernetes.io/control-plane, operator: DoesNotExist}]}
  limits: {resources: {nodes: 3}}`,
			check: func(t *testing.T, q Quota) {
				if q.Applies(node(map[string]string{"node-role.kubernetes.io/control-plane": ""})) || !q.Applies(node(nil)) {
					t.Error("DoesNotExist not applied")
				}
			}},
		{name: "bad operator", yaml: `
metadata: {name: bad}
spec:
  selector: {matchExpressions: [{key: a, operator: Near}]}
  limits: {resources: {nodes: 3}}`, err: "spec.selector"},
		{name: "empty limits", yaml: `
metadata: {name: empty}
spec: {limits: {}}`, err: "limits nothing"},
		{name: "negative", yaml: `
metadata: {name: neg}
spec: {limits: {resources: {cpu: "-1", nodes: -2}}}`, err: "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cq := &CapacityQuota{}
			if err := yaml.UnmarshalStrict([]byte(tc.yaml), cq); err != nil {
				t.Fatal(err)
			}
			q, err := Parse(cq)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, q)
		})
	}
}

func TestAmount(t *testing.T) {
	n := &apiv1.Node{Status: apiv1.NodeStatus{Capacity: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("1500m")}}}
	if Amount(n, NodesResource) != 1000 || Amount(n, apiv1.ResourceCPU) != 1500 || Amount(n, "nvidia.com/gpu") != 0 {
		t.Fatalf("amounts: nodes %d, cpu %d, gpu %d", Amount(n, NodesResource), Amount(n, apiv1.ResourceCPU), Amount(n, "nvidia.com/gpu"))
	}
}

func TestManifestIsTheCRD(t *testing.T) {
	var crd struct {
		Metadata struct{ Name string }
		Spec     struct {
			Group, Scope string
			Versions     []struct{ Name string }
		}
	}
	if err := yaml.Unmarshal(Manifest(), &crd); err != nil {
		t.Fatal(err)
	}
	if crd.Metadata.Name != Resource.Resource+"."+Resource.Group || crd.Spec.Scope != "Cluster" ||
		len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != GroupVersion.Version {
		t.Fatalf("manifest %+v does not match %v", crd, Resource)
	}
}

func TestUsed(t *testing.T) {
	cq := &CapacityQuota{Spec: Spec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}},
		Limits: Limits{Resources: apiv1.ResourceList{"cpu": resource.MustParse("64"), "memory": resource.MustParse("1Ti"),
			NodesResource: resource.MustParse("10")}}}}
	q, err := Parse(cq)
	if err != nil {
		t.Fatal(err)
	}
	node := func(pool, cpu string) *apiv1.Node {
		return &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"pool": pool}}, Status: apiv1.NodeStatus{
			Capacity: apiv1.ResourceList{"cpu": resource.MustParse(cpu), "memory": resource.MustParse("16Gi")}}}
	}
	used := q.Used([]*apiv1.Node{node("a", "4"), node("a", "1500m"), node("b", "16")})
	want := map[string]string{"cpu": "5500m", "memory": "32Gi", "nodes": "2"}
	for res, w := range want {
		v := used[apiv1.ResourceName(res)]
		if v.String() != w {
			t.Errorf("used %s = %s, want %s", res, v.String(), w)
		}
	}
	if len(used) != 3 {
		t.Errorf("used has %d resources, want the 3 limited", len(used))
	}
}
