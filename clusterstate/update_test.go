package clusterstate

import (
	"testing"
	"time"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

// TestUpdateForgetsScaleUpsOfGoneGroups: the in-flight scale-up of a group
// the provider no longer lists is dropped by the next Update, so it holds
// no loop back as "scale-up in progress"; one of a listed group is kept.
func TestUpdateForgetsScaleUpsOfGoneGroups(t *testing.T) {
	before := fakeprovider.NewProvider()
	before.AddNodeGroup("a", 0, 10, 1, nil)
	before.AddNodeGroup("b", 0, 10, 1, nil)
	r := NewRegistry(DefaultOptions())
	update(t, r, before, nil, t0)
	r.RegisterScaleUp("a", 1, t0)
	r.RegisterScaleUp("b", 1, t0)

	after := fakeprovider.NewProvider()
	after.AddNodeGroup("a", 0, 10, 2, nil)
	update(t, r, after, nil, t0.Add(time.Second))
	if !r.ScaleUpInProgress() || r.Group("a").ScaleUp == nil {
		t.Errorf("the scale-up of listed group a is gone: %+v", r.Group("a"))
	}
	after2 := fakeprovider.NewProvider()
	update(t, r, after2, nil, t0.Add(2*time.Second))
	if r.ScaleUpInProgress() {
		t.Errorf("scale-ups of groups the provider no longer lists are still in progress")
	}
}
