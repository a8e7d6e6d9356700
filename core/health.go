package core

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// HealthCheck answers /health-check. Until monitoring starts (a standby
// replica waiting for the lease) it always answers 200. Afterwards it fails
// when no loop has started within maxInactivity or none has succeeded within
// maxFailing; before the first success both limits are maxStartup.
type HealthCheck struct {
	clock         clock.PassiveClock
	maxInactivity time.Duration
	maxFailing    time.Duration
	maxStartup    time.Duration

	mu           sync.Mutex
	monitoring   bool
	succeeded    bool
	lastActivity time.Time
	lastSuccess  time.Time
}

// NewHealthCheck builds a HealthCheck. maxStartup is raised to at least the
// other two limits, as upstream does.
func NewHealthCheck(clk clock.PassiveClock, maxInactivity, maxFailing, maxStartup time.Duration) *HealthCheck {
	maxStartup = max(maxStartup, maxInactivity, maxFailing)
	return &HealthCheck{clock: clk, maxInactivity: maxInactivity, maxFailing: maxFailing, maxStartup: maxStartup}
}

// StartMonitoring arms the check; call it when this replica starts acting.
func (h *HealthCheck) StartMonitoring() {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock.Now()
	h.monitoring = true
	h.lastActivity, h.lastSuccess = now, now
}

// UpdateLastActivity records that a loop started at now.
func (h *HealthCheck) UpdateLastActivity(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastActivity = now
}

// UpdateLastSuccessfulRun records that a loop finished without error at now.
func (h *HealthCheck) UpdateLastSuccessfulRun(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.succeeded = true
	h.lastSuccess = now
}

// Check returns nil when the autoscaler is healthy.
func (h *HealthCheck) Check() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.monitoring {
		return nil
	}
	inactivity, failing := h.maxInactivity, h.maxFailing
	if !h.succeeded {
		inactivity, failing = h.maxStartup, h.maxStartup
	}
	now := h.clock.Now()
	if now.After(h.lastActivity.Add(inactivity)) || now.After(h.lastSuccess.Add(failing)) {
		return fmt.Errorf("last activity %v ago (limit %v), last success %v ago (limit %v)",
			now.Sub(h.lastActivity).Round(time.Second), inactivity, now.Sub(h.lastSuccess).Round(time.Second), failing)
	}
	return nil
}

// ServeHTTP implements http.Handler.
func (h *HealthCheck) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	if err := h.Check(); err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = fmt.Fprintf(w, "Error: %v\n", err)
		return
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("OK\n"))
}
