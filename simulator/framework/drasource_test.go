package framework

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
)

func TestDRAServed(t *testing.T) {
	all := []metav1.APIResource{{Name: "resourceslices"}, {Name: "resourceclaims"}, {Name: "deviceclasses"},
		{Name: "resourceclaimtemplates"}}
	for _, tc := range []struct {
		name      string
		resources []*metav1.APIResourceList
		want      bool
	}{
		{name: "served", resources: []*metav1.APIResourceList{{GroupVersion: DRAGroupVersion, APIResources: all}}, want: true},
		{name: "group version not served", resources: []*metav1.APIResourceList{{GroupVersion: "resource.k8s.io/v1beta1",
			APIResources: all}}},
		{name: "a resource missing", resources: []*metav1.APIResourceList{{GroupVersion: DRAGroupVersion,
			APIResources: all[:3]}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := fake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)
			d.Resources = tc.resources
			got, err := DRAServed(d)
			if err != nil || got != tc.want {
				t.Errorf("DRAServed = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
