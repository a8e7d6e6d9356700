package core

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestHealthCheck(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		steps   func(h *HealthCheck, c *clocktesting.FakeClock)
		healthy bool
	}{
		{name: "standby replica is healthy however long it waits", healthy: true,
			steps: func(h *HealthCheck, c *clocktesting.FakeClock) { c.Step(24 * time.Hour) }},
		{name: "before the first success the startup limit applies", healthy: true,
			steps: func(h *HealthCheck, c *clocktesting.FakeClock) {
				h.StartMonitoring()
				c.Step(19 * time.Minute) // past max-inactivity and max-failing-time, within max-startup-time
			}},
		{name: "first success too late", healthy: false,
			steps: func(h *HealthCheck, c *clocktesting.FakeClock) {
				h.StartMonitoring()
				c.Step(21 * time.Minute)
			}},
		{name: "loops succeeding", healthy: true,
			steps: func(h *HealthCheck, c *clocktesting.FakeClock) {
				h.StartMonitoring()
				for i := 0; i < 100; i++ {
					c.Step(10 * time.Second)
					h.UpdateLastActivity(c.Now())
					h.UpdateLastSuccessfulRun(c.Now())
				}
			}},
		{name: "no loop started for longer than max-inactivity", healthy: false,
			steps: func(h *HealthCheck, c *clocktesting.FakeClock) {
				h.StartMonitoring()
				h.UpdateLastActivity(c.Now())
				h.UpdateLastSuccessfulRun(c.Now())
				c.Step(11 * time.Minute)
			}},
		{name: "loops run but keep failing for longer than max-failing-time", healthy: false,
			steps: func(h *HealthCheck, c *clocktesting.FakeClock) {
				h.StartMonitoring()
				h.UpdateLastSuccessfulRun(c.Now())
				for i := 0; i < 16; i++ {
					c.Step(time.Minute)
					h.UpdateLastActivity(c.Now())
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := clocktesting.NewFakeClock(start)
			h := NewHealthCheck(c, 10*time.Minute, 15*time.Minute, 20*time.Minute)
			tc.steps(h, c)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/health-check", nil))
			want := http.StatusOK
			if !tc.healthy {
				want = http.StatusInternalServerError
			}
			if rec.Code != want {
				t.Errorf("status %d, want %d; body %q", rec.Code, want, rec.Body.String())
			}
		})
	}
}

func TestStartupLimitIsRaisedToTheOthers(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Now())
	h := NewHealthCheck(c, 30*time.Minute, 40*time.Minute, 5*time.Minute)
	h.StartMonitoring()
	c.Step(39 * time.Minute)
	if err := h.Check(); err != nil {
		t.Errorf("unhealthy within max-failing-time before the first success: %v", err)
	}
}
