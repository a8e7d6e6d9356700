package framework

import (
	"fmt"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingapi "k8s.io/api/scheduling/v1alpha2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
)

// draManager is the scheduler framework's SharedDRAManager over the
// snapshot: the DynamicResources plugin reads slices, claims and classes
// from it, and what it reserves (an allocation) is written at once onto the
// snapshot's copy of the claim, so Revert releases it. Nothing is ever
// pending: the simulation has no binding phase.
type draManager struct{ snap *Snapshot }

var (
	_ fwk.SharedDRAManager     = draManager{}
	_ fwk.ResourceClaimTracker = claimTracker{}
)

func (m draManager) ResourceClaims() fwk.ResourceClaimTracker     { return claimTracker(m) }
func (m draManager) ResourceSlices() fwk.ResourceSliceLister      { return sliceLister(m) }
func (m draManager) DeviceClasses() fwk.DeviceClassLister         { return classLister(m) }
func (m draManager) DeviceClassResolver() fwk.DeviceClassResolver { return noExtendedResources{} }
func (m draManager) PodGroups() fwk.PodGroupLister                { return noPodGroups{} }

type sliceLister struct{ snap *Snapshot }

// ListWithDeviceTaintRules lists the slices; DeviceTaintRules are not applied.
func (l sliceLister) ListWithDeviceTaintRules() ([]*resourceapi.ResourceSlice, error) {
	return l.snap.allSlices(), nil
}

type classLister struct{ snap *Snapshot }

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(l.snap.dra.classes))
	for _, c := range l.snap.dra.classes {
		out = append(out, c)
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l.snap.dra.classes[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

// noExtendedResources maps no extended resource to a device class: pods
// asking for extended resources are simulated as device-plugin pods.
type noExtendedResources struct{}

func (noExtendedResources) GetDeviceClass(apiv1.ResourceName) *resourceapi.DeviceClass { return nil }

type noPodGroups struct{}

func (noPodGroups) Get(namespace, name string) (*schedulingapi.PodGroup, error) {
	return nil, apierrors.NewNotFound(schedulingapi.Resource("podgroups"), namespace+"/"+name)
}

type claimTracker struct{ snap *Snapshot }

func (t claimTracker) List() ([]*resourceapi.ResourceClaim, error) {
	out := make([]*resourceapi.ResourceClaim, 0, len(t.snap.dra.claims))
	for _, c := range t.snap.dra.claims {
		out = append(out, c)
	}
	return out, nil
}

func (t claimTracker) Get(namespace, name string) (*resourceapi.ResourceClaim, error) {
	if c, ok := t.snap.Claim(namespace, name); ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), namespace+"/"+name)
}

func (t claimTracker) ListAllAllocatedDevices() (sets.Set[structured.DeviceID], error) {
	st, err := t.GatherAllocatedState()
	if err != nil {
		return nil, err
	}
	return st.AllocatedDevices, nil
}

// GatherAllocatedState collects the devices of every allocated claim:
// dedicated ones, and shares of devices with consumable capacity; devices
// allocated with admin access are not taken (see holdsDevice).
func (t claimTracker) GatherAllocatedState() (*structured.AllocatedState, error) {
	st := &structured.AllocatedState{AllocatedDevices: sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.ConsumedCapacityCollection{}}
	for _, c := range t.snap.dra.claims {
		if c.Status.Allocation == nil {
			continue
		}
		for i := range c.Status.Allocation.Devices.Results {
			r := &c.Status.Allocation.Devices.Results[i]
			if !holdsDevice(r) {
				continue
			}
			id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
			if r.ShareID == nil {
				st.AllocatedDevices.Insert(id)
				continue
			}
			st.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
			if r.ConsumedCapacity != nil {
				st.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
			}
		}
	}
	return st, nil
}

// SignalClaimPendingAllocation is how the plugin's Reserve hands over an
// allocation: it is written onto the snapshot's claim at once.
func (t claimTracker) SignalClaimPendingAllocation(_ types.UID, claim *resourceapi.ResourceClaim) error {
	if claim == nil || claim.Status.Allocation == nil {
		return fmt.Errorf("claim without an allocation")
	}
	t.snap.putClaim(claim)
	return nil
}

func (t claimTracker) GetPendingAllocation(types.UID) *resourceapi.AllocationResult { return nil }

func (t claimTracker) MaybeRemoveClaimPendingAllocation(types.UID, bool) bool { return false }

func (t claimTracker) AssumeClaimAfterAPICall(claim *resourceapi.ResourceClaim) error {
	t.snap.putClaim(claim)
	return nil
}

// AssumedClaimRestore does nothing: Revert restores claims.
func (t claimTracker) AssumedClaimRestore(string, string) {}
