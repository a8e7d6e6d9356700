package clusterstate

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := NewBackoff(5*time.Minute, 30*time.Minute, 3*time.Hour)
	r := BackoffReason{ErrorCode: "STOCKOUT"}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	steps := []struct {
		failAt    time.Duration
		wantUntil time.Duration
	}{
		{0, 5 * time.Minute},                   // first failure: initial
		{2 * time.Minute, 5 * time.Minute},     // during the back-off: not extended
		{6 * time.Minute, 16 * time.Minute},    // after it: doubled to 10m
		{17 * time.Minute, 37 * time.Minute},   // 20m
		{40 * time.Minute, 70 * time.Minute},   // 40m capped at 30m
		{71 * time.Minute, 101 * time.Minute},  // stays at the cap
		{101*time.Minute + 3*time.Hour + 1, 0}, // quiet for longer than reset: initial again
	}
	for i, s := range steps {
		until := b.RegisterFailure("ng", r, at(s.failAt))
		want := at(s.wantUntil)
		if s.wantUntil == 0 {
			want = at(s.failAt).Add(5 * time.Minute)
		}
		if !until.Equal(want) {
			t.Errorf("step %d: backed off until %v, want %v", i, until.Sub(t0), want.Sub(t0))
		}
	}
	if off, why := b.BackedOff("ng", at(101*time.Minute+3*time.Hour+2)); !off || why.ErrorCode != "STOCKOUT" {
		t.Errorf("BackedOff = %v %v", off, why)
	}
	if off, _ := b.BackedOff("ng", at(101*time.Minute+3*time.Hour+6*time.Minute)); off {
		t.Error("still backed off after the back-off expired")
	}
	if off, _ := b.BackedOff("other", t0); off {
		t.Error("a group that never failed is backed off")
	}
}
