package processor

import "time"

// Metrics receives the requests' numbers; metrics.Metrics implements it.
type Metrics interface {
	// Transition counts a condition change; sinceCreation times the
	// request's first Accepted and Provisioned.
	Transition(class, condition, status, reason string, sinceCreation time.Duration)
	// Requests sets the number of requests by class and state.
	Requests(counts map[[2]string]int)
	// BookedPods sets the number of pods whose capacity is booked.
	BookedPods(n int)
}

type nopMetrics struct{}

func (nopMetrics) Transition(string, string, string, string, time.Duration) {}
func (nopMetrics) Requests(map[[2]string]int)                               {}
func (nopMetrics) BookedPods(int)                                           {}
