package clusterapi

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"
)

// A loop that starts right after the autoscaler's own increase, on an
// informers' cache that has not shown it yet, counts the write: the group's
// target is the written one, so no second node is asked for the same pods
// (seen on the control plane: two loops 4 ms apart, two nodes for one
// pod). The cache is believed again once it shows the write, after
// ownLagWindow, and whenever it shows replicas the autoscaler's writes do
// not lead to.
func TestTargetCountsOwnWriteTheCacheHasNotShown(t *testing.T) {
	ctx := context.Background()
	md := makeObj(kindMachineDeployment, "ns", "md").sizes("0", "3").replicas(0)
	md.u.SetResourceVersion("10")
	stale := md.u.DeepCopy()
	// The fake client keeps resourceVersions as given: "11" stands for the
	// version the autoscaler's write makes.
	md.u.SetResourceVersion("11")
	client, _ := newFake(t, md)
	fc := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	d, err := WithAutoDiscovery(nil)
	if err != nil {
		t.Fatal(err)
	}
	p := New(client, DefaultGroup, testVersion, d, WithClock(fc))
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := onlyGroup(t, p).IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	target := func(objs ...*unstructured.Unstructured) int {
		t.Helper()
		var list []unstructured.Unstructured
		for _, o := range objs {
			list = append(list, *o)
		}
		s := p.buildSnapshot(ctx, map[string][]unstructured.Unstructured{kindMachineDeployment: list})
		if len(s.groups) != 1 {
			t.Fatalf("%d groups, want 1", len(s.groups))
		}
		return s.groups[0].target
	}
	withReplicas := func(n int64, rv string) *unstructured.Unstructured {
		o := stale.DeepCopy()
		_ = unstructured.SetNestedField(o.Object, n, "spec", "replicas")
		o.SetResourceVersion(rv)
		return o
	}

	if got := target(stale); got != 1 {
		t.Errorf("target on a cache behind the increase = %d, want 1 (the write)", got)
	}
	if got := target(withReplicas(3, "12")); got != 3 {
		t.Errorf("target when someone else set 3 = %d, want 3 (the cache)", got)
	}
	if got := target(withReplicas(1, "11")); got != 1 {
		t.Errorf("target once the cache shows the write = %d, want 1", got)
	}
	// Seen: a later 0 is someone else's, believed at once.
	if got := target(withReplicas(0, "13")); got != 0 {
		t.Errorf("target after the write was seen and replicas went back to 0 = %d, want 0", got)
	}

	// A second write, never shown: followed only within ownLagWindow.
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := onlyGroup(t, p).IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	fc.SetTime(fc.Now().Add(ownLagWindow - time.Second))
	if got := target(withReplicas(1, "13")); got != 2 {
		t.Errorf("target on a cache behind the second increase = %d, want 2", got)
	}
	fc.SetTime(fc.Now().Add(2 * time.Second))
	if got := target(withReplicas(1, "13")); got != 1 {
		t.Errorf("target past ownLagWindow = %d, want 1 (the cache)", got)
	}
}
