package aws

import (
	"context"
	"testing"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// TestCapacityBlockEnd: a Capacity Block's group says the block's end; an
// On-Demand Capacity Reservation's group and an ordinary group say none.
// Inside the drain window (here 11 h before a block ending in 10 h) the
// block's group has no room left; outside it (9 h), it has the block's.
func TestCapacityBlockEnd(t *testing.T) {
	_, _, block, end := reservedFake(t)
	for _, tc := range []struct {
		before        time.Duration
		wantMax, left int
	}{{before: 9 * time.Hour, wantMax: 2, left: 2}, {before: 11 * time.Hour, wantMax: 0, left: 0}} {
		p := newTestProvider(t, []string{"0:10:odcr", "0:10:block", "0:10:plain"}, nil, WithCapacityBlockDrainBefore(tc.before))
		if err := p.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		g := group(t, p, "block")
		got, ok := g.ReservationEnd()
		if want := (cloudprovider.ReservationEnd{ID: block, End: end}); !ok || got.ID != want.ID || !got.End.Equal(want.End) {
			t.Errorf("before=%v: block's ReservationEnd() = %+v, %v; want %+v", tc.before, got, ok, want)
		}
		if g.MaxSize() != tc.wantMax || g.ReservedNodesLeft() != tc.left {
			t.Errorf("before=%v: block's max %d, left %d; want %d, %d", tc.before, g.MaxSize(), g.ReservedNodesLeft(), tc.wantMax, tc.left)
		}
		for _, n := range []string{"odcr", "plain"} {
			if e, ok := group(t, p, n).ReservationEnd(); ok {
				t.Errorf("group %s says an end: %+v", n, e)
			}
		}
		if g := group(t, p, "odcr"); g.MaxSize() != 3 {
			t.Errorf("before=%v: the ODCR's group max %d, want 3 (no drain window for it)", tc.before, g.MaxSize())
		}
	}
}
