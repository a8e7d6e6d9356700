package podutil

import (
	"testing"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestConsumedRequestName(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ann      map[string]string
		want     string
		wantFind bool
	}{
		{name: "none"},
		{name: "current key", ann: map[string]string{ConsumeAnnotation: "r1"}, want: "r1", wantFind: true},
		{name: "deprecated key", ann: map[string]string{DeprecatedConsumeAnnotation: "r2"}, want: "r2", wantFind: true},
		{name: "current key wins", ann: map[string]string{ConsumeAnnotation: "r1", DeprecatedConsumeAnnotation: "r2"},
			want: "r1", wantFind: true},
		{name: "empty current key falls back", ann: map[string]string{ConsumeAnnotation: "", DeprecatedConsumeAnnotation: "r2"},
			want: "r2", wantFind: true},
		{name: "empty values count as absent", ann: map[string]string{ConsumeAnnotation: "", DeprecatedConsumeAnnotation: ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: tc.ann}}
			got, ok := ConsumedRequestName(p)
			if got != tc.want || ok != tc.wantFind {
				t.Errorf("ConsumedRequestName() = %q, %v; want %q, %v", got, ok, tc.want, tc.wantFind)
			}
		})
	}
	if got, ok := ConsumedRequestName(nil); got != "" || ok {
		t.Errorf("ConsumedRequestName(nil) = %q, %v; want \"\", false", got, ok)
	}
}
