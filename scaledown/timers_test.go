package scaledown

import (
	"context"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// With --max-bulk-soft-taint-count=0 no candidate taint is written, and the
// unneeded timer lives in memory: the node becomes removable after the
// unneeded time all the same.
func TestNoSoftTaintsKeepsTheTimerInMemory(t *testing.T) {
	f := newFixture(t, 0, map[string]string{"a": ""}, func(o *fixtureOptions) { o.MaxBulkSoftTaintCount = 0 })
	if plan := f.plan(t, t0); len(plan.Removable) != 0 || plan.Unremovable["a"] != ReasonNotUnneededLongEnough {
		t.Fatalf("at t0: removable %v, reason %q", names(plan.Removable), plan.Unremovable["a"])
	}
	for _, d := range []time.Duration{time.Minute, 5 * time.Minute} {
		if plan := f.plan(t, t0.Add(d)); len(plan.Removable) != 0 {
			t.Fatalf("removable %v after %v", names(plan.Removable), d)
		}
	}
	plan := f.plan(t, t0.Add(10*time.Minute+time.Second))
	if !names(plan.Removable)["a"] {
		t.Errorf("not removable 10 minutes after it became unneeded: reason %q", plan.Unremovable["a"])
	}
	n, _ := f.client.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
	if hasTaint(n, DeletionCandidateTaint) {
		t.Error("a candidate taint was written with --max-bulk-soft-taint-count=0")
	}
}

// With --max-bulk-soft-taint-count=0 a candidate taint left by an earlier
// configuration is neither trusted nor kept.
func TestNoSoftTaintsIgnoresAndRemovesOldTaints(t *testing.T) {
	f := newFixture(t, 0, map[string]string{"a": ""}, func(o *fixtureOptions) { o.MaxBulkSoftTaintCount = 0 })
	n, _ := f.client.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
	n.Spec.Taints = []apiv1.Taint{{Key: DeletionCandidateTaint, Value: "1000", Effect: apiv1.TaintEffectPreferNoSchedule}}
	if _, err := f.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if plan := f.plan(t, t0); len(plan.Removable) != 0 {
		t.Fatal("removable at once on the strength of an old taint")
	}
	n, _ = f.client.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
	if hasTaint(n, DeletionCandidateTaint) {
		t.Error("the old candidate taint was kept")
	}
}

// Nodes beyond the per-loop soft-taint budget keep their timers: three
// nodes unneeded since t0 with a budget of one taint per loop are all
// removable ten minutes after t0, and each taint carries t0.
func TestNodesBeyondTheSoftTaintBudgetKeepTheirTimers(t *testing.T) {
	f := newFixture(t, 0, map[string]string{"a": "", "b": "", "c": ""}, func(o *fixtureOptions) { o.MaxBulkSoftTaintCount = 1 })
	for _, d := range []time.Duration{0, time.Minute, 2 * time.Minute} {
		f.plan(t, t0.Add(d))
	}
	for _, name := range []string{"a", "b", "c"} {
		n, _ := f.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if since, ok := taintTime(n, DeletionCandidateTaint); !ok || !since.Equal(t0) {
			t.Errorf("%s: candidate taint %v (present %v), want %v", name, since, ok, t0)
		}
	}
	plan := f.plan(t, t0.Add(10*time.Minute+time.Second))
	if got := names(plan.Removable); len(got) != 3 {
		t.Errorf("removable %v, want a, b and c (unneeded since t0): %v", got, plan.Unremovable)
	}
}
