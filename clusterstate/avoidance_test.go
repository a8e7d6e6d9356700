package clusterstate

import (
	"context"
	"testing"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

// TestBackoffHoldLeavesTheFailureBackoffAlone: a hold backs a group off
// until its fixed end with its own reason; the exponential back-off of
// real failures goes on as if there had been no hold.
func TestBackoffHoldLeavesTheFailureBackoffAlone(t *testing.T) {
	b := NewBackoff(5*time.Minute, 30*time.Minute, 3*time.Hour)
	spot := BackoffReason{ErrorCode: "SpotInterrupted", ErrorMessage: "m5.large in us-east-1a"}
	b.SetHolds(map[string]Hold{"ng": {Reason: spot, Until: t0.Add(2 * time.Minute)}, "gone": {Reason: spot, Until: t0}}, t0)
	if off, why := b.BackedOff("ng", t0.Add(time.Minute)); !off || why != spot {
		t.Errorf("held group: BackedOff %v %+v, want the hold's reason", off, why)
	}
	if u := b.Until("ng", t0); !u.Equal(t0.Add(2 * time.Minute)) {
		t.Errorf("held until %v, want 2m", u.Sub(t0))
	}
	if off, _ := b.BackedOff("gone", t0); off {
		t.Error("a hold that ended at now is on")
	}
	if off, _ := b.BackedOff("ng", t0.Add(2*time.Minute)); off {
		t.Error("backed off after the hold ended")
	}
	// A real failure during the hold starts the back-off at initial (5m,
	// ending after the hold: it is what BackedOff reports); the next one,
	// after it, doubles it as without a hold.
	stock := BackoffReason{ErrorCode: "InsufficientInstanceCapacity"}
	if until := b.RegisterFailure("ng", stock, t0.Add(time.Minute)); !until.Equal(t0.Add(6 * time.Minute)) {
		t.Errorf("first failure backed off until %v, want 6m", until.Sub(t0))
	}
	if _, why := b.BackedOff("ng", t0.Add(90*time.Second)); why != stock {
		t.Errorf("reason %+v, want the failure's, which ends later", why)
	}
	if until := b.RegisterFailure("ng", stock, t0.Add(7*time.Minute)); !until.Equal(t0.Add(17 * time.Minute)) {
		t.Errorf("second failure backed off until %v, want 17m (doubled)", until.Sub(t0))
	}
	// A hold ending after the failure's back-off is what is reported, and
	// once dropped the failure's back-off is back.
	b.SetHolds(map[string]Hold{"ng": {Reason: spot, Until: t0.Add(20 * time.Minute)}}, t0.Add(8*time.Minute))
	if _, why := b.BackedOff("ng", t0.Add(8*time.Minute)); why != spot || !b.Until("ng", t0.Add(8*time.Minute)).Equal(t0.Add(20*time.Minute)) {
		t.Errorf("reason %+v until %v, want the later hold", why, b.Until("ng", t0.Add(8*time.Minute)).Sub(t0))
	}
	b.SetHolds(nil, t0.Add(8*time.Minute))
	if _, why := b.BackedOff("ng", t0.Add(8*time.Minute)); why != stock || !b.Until("ng", t0.Add(8*time.Minute)).Equal(t0.Add(17*time.Minute)) {
		t.Errorf("reason %+v, want the failure's back-off back", why)
	}
}

// avoidingProvider is the fake provider that avoids the groups it is told.
type avoidingProvider struct {
	*fakeprovider.Provider
	avoided []cloudprovider.AvoidedGroup
}

func (p *avoidingProvider) AvoidedGroups(now time.Time) []cloudprovider.AvoidedGroup {
	return p.avoided
}

// TestRegistryHoldsTheGroupsTheProviderAvoids: a group the provider
// avoids is backed off from the Update that first hears of it to the
// provider's end, with its code and message, without being a failure; an
// unknown group is skipped.
func TestRegistryHoldsTheGroupsTheProviderAvoids(t *testing.T) {
	ctx := context.Background()
	p := &avoidingProvider{Provider: fakeprovider.NewProvider()}
	p.AddNodeGroup("spot", 0, 10, 0, nil)
	p.AddNodeGroup("on-demand", 0, 10, 0, nil)
	r := NewRegistry(DefaultOptions())
	update(t, r, p, nil, t0)
	if r.Group("spot").BackedOff {
		t.Fatal("backed off before any avoidance")
	}
	until := t0.Add(5 * time.Minute)
	p.avoided = []cloudprovider.AvoidedGroup{{Group: "spot", ErrorCode: "SpotInterrupted", ErrorMessage: "m5.large in us-east-1a", Until: until},
		{Group: "no-such-group", ErrorCode: "SpotInterrupted", Until: until}}
	update(t, r, p, nil, t0.Add(time.Second))
	gs := r.Group("spot")
	if !gs.BackedOff || gs.BackoffReason.ErrorCode != "SpotInterrupted" || gs.BackoffReason.ErrorMessage != "m5.large in us-east-1a" ||
		!gs.BackoffUntil.Equal(until) {
		t.Errorf("spot group: backed off %v %+v until %v; want SpotInterrupted until 5m", gs.BackedOff, gs.BackoffReason, gs.BackoffUntil.Sub(t0))
	}
	if r.Group("on-demand").BackedOff || len(r.Failures()) != 0 {
		t.Errorf("on-demand backed off %v, failures %+v; want neither", r.Group("on-demand").BackedOff, r.Failures())
	}
	// A real failure while held starts the group's back-off at initial.
	r.RegisterFailedScaleUp(ctx, "spot", BackoffReason{ErrorCode: "InsufficientInstanceCapacity"}, t0.Add(2*time.Second))
	if u := r.Group("spot").BackoffUntil; !u.Equal(t0.Add(2*time.Second + 5*time.Minute)) {
		t.Errorf("after a failure: until %v, want the failure's initial back-off (5m2s)", u.Sub(t0))
	}
	// The provider stops avoiding: only the failure's back-off is left.
	p.avoided = nil
	update(t, r, p, nil, t0.Add(3*time.Second))
	if gs := r.Group("spot"); !gs.BackedOff || gs.BackoffReason.ErrorCode != "InsufficientInstanceCapacity" {
		t.Errorf("after the avoidance: %v %+v, want the failure's back-off", gs.BackedOff, gs.BackoffReason)
	}
	update(t, r, p, nil, t0.Add(6*time.Minute))
	if r.Group("spot").BackedOff {
		t.Error("still backed off after both ended")
	}
}
