package processors

import (
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOldEnoughForScaleUp(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	pod := func(age time.Duration, annotation string) *apiv1.Pod {
		p := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-age))}}
		if annotation != "" {
			p.Annotations = map[string]string{PodScaleUpDelayAnnotation: annotation}
		}
		return p
	}
	for _, tc := range []struct {
		name    string
		pod     *apiv1.Pod
		delay   time.Duration
		want    bool
		wantErr bool
	}{
		{"no delay", pod(0, ""), 0, true, false},
		{"no delay, created ahead of this clock", pod(-30*time.Second, ""), 0, true, false},
		{"annotation with no flag delay", pod(30*time.Second, "1m"), 0, false, false},
		{"younger than the flag", pod(5*time.Second, ""), 10 * time.Second, false, false},
		{"older than the flag", pod(15*time.Second, ""), 10 * time.Second, true, false},
		{"annotation lengthens", pod(15*time.Second, "1m"), 10 * time.Second, false, false},
		{"annotation reached", pod(2*time.Minute, "1m"), 10 * time.Second, true, false},
		{"annotation cannot shorten", pod(5*time.Second, "1s"), 10 * time.Second, false, true},
		{"bad annotation keeps the flag", pod(15*time.Second, "soon"), 10 * time.Second, true, true},
	} {
		got, err := oldEnoughForScaleUp(tc.pod, now, tc.delay)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("%s: %v, %v; want %v, error %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}
