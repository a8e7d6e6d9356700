package provreq

import "testing"

func TestNormalizeClass(t *testing.T) {
	tests := []struct {
		class       string
		wantClass   string
		wantHandled bool
	}{
		{ClassCheckCapacity, ClassCheckCapacity, true},
		{LegacyClassCheckCapacity, ClassCheckCapacity, true},
		{ClassBestEffortAtomicScaleUp, ClassBestEffortAtomicScaleUp, true},
		{LegacyClassAtomicScaleUp, ClassBestEffortAtomicScaleUp, true},
		{"queued-provisioning.gke.io", "queued-provisioning.gke.io", false},
		{"", "", false},
		{"CHECK-CAPACITY.autoscaling.x-k8s.io", "CHECK-CAPACITY.autoscaling.x-k8s.io", false},
		{"prefix-check-capacity.autoscaling.x-k8s.io", "prefix-check-capacity.autoscaling.x-k8s.io", false},
	}
	for _, tc := range tests {
		t.Run(tc.class, func(t *testing.T) {
			got, handled := NormalizeClass(tc.class)
			if got != tc.wantClass || handled != tc.wantHandled {
				t.Errorf("NormalizeClass(%q) = %q, %v; want %q, %v", tc.class, got, handled, tc.wantClass, tc.wantHandled)
			}
		})
	}
}
