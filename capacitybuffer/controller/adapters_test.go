package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// TestAdaptersReadTheCacheAndWriteAsTheController: quotas and templates
// are read from the informer cache, templates written through the API as
// the controller's field manager.
func TestAdaptersReadTheCacheAndWriteAsTheController(t *testing.T) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	quota := &apiv1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "q"}}
	other := &apiv1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "q"}}
	for _, q := range []*apiv1.ResourceQuota{quota, other} {
		if err := factory.Core().V1().ResourceQuotas().Informer().GetStore().Add(q); err != nil {
			t.Fatal(err)
		}
	}
	got, err := NewResourceQuotas(factory.Core().V1().ResourceQuotas().Lister()).List("a")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]*apiv1.ResourceQuota{quota}, got); diff != "" {
		t.Errorf("quotas of namespace a (-want +got):\n%s", diff)
	}

	pt := &apiv1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "t"}}
	templates := NewAPITemplates(getterFunc(func(string, string) (*apiv1.PodTemplate, error) { return pt, nil }), client.CoreV1())
	if got, err := templates.Get("a", "t"); err != nil || got != pt {
		t.Errorf("Get = %v, %v; want the getter's template", got, err)
	}
	if _, err := templates.Create(t.Context(), pt); err != nil {
		t.Fatal(err)
	}
	updated := pt.DeepCopy()
	updated.Labels = map[string]string{"k": "v"}
	if _, err := templates.Update(t.Context(), updated); err != nil {
		t.Fatal(err)
	}
	stored, err := client.CoreV1().PodTemplates("a").Get(t.Context(), "t", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stored.Labels["k"] != "v" {
		t.Errorf("stored template labels = %v, want the update's", stored.Labels)
	}
}

type getterFunc func(namespace, name string) (*apiv1.PodTemplate, error)

func (f getterFunc) Get(namespace, name string) (*apiv1.PodTemplate, error) {
	return f(namespace, name)
}
