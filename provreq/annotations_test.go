package provreq

import (
	"testing"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func podWith(ann map[string]string) *apiv1.Pod {
	return &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Annotations: ann}}
}

func TestConsumedRequestName(t *testing.T) {
	tests := []struct {
		name     string
		ann      map[string]string
		wantName string
		wantOK   bool
	}{
		{"none", nil, "", false},
		{"current key", map[string]string{ConsumeAnnotation: "req-a"}, "req-a", true},
		{"deprecated key", map[string]string{DeprecatedConsumeAnnotation: "req-b"}, "req-b", true},
		{"current key wins", map[string]string{ConsumeAnnotation: "req-a", DeprecatedConsumeAnnotation: "req-b"}, "req-a", true},
		{"empty current falls back", map[string]string{ConsumeAnnotation: "", DeprecatedConsumeAnnotation: "req-b"}, "req-b", true},
		{"empty only", map[string]string{ConsumeAnnotation: ""}, "", false},
		{"class annotation alone", map[string]string{ClassAnnotation: ClassCheckCapacity}, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ConsumedRequestName(podWith(tc.ann))
			if got != tc.wantName || ok != tc.wantOK {
				t.Errorf("ConsumedRequestName = %q, %v; want %q, %v", got, ok, tc.wantName, tc.wantOK)
			}
		})
	}
	if _, ok := ConsumedRequestName(nil); ok {
		t.Error("ConsumedRequestName(nil) found a name")
	}
}

func TestPodClassName(t *testing.T) {
	got, ok := PodClassName(podWith(map[string]string{DeprecatedClassAnnotation: LegacyClassCheckCapacity}))
	if got != LegacyClassCheckCapacity || !ok {
		t.Errorf("PodClassName (deprecated key) = %q, %v", got, ok)
	}
	got, ok = PodClassName(podWith(map[string]string{ClassAnnotation: ClassBestEffortAtomicScaleUp, DeprecatedClassAnnotation: "x"}))
	if got != ClassBestEffortAtomicScaleUp || !ok {
		t.Errorf("PodClassName (both keys) = %q, %v", got, ok)
	}
}
