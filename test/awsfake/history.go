package awsfake

import "time"

// DesiredChange is a SetDesiredCapacity call that changed a group's
// desired capacity, at the fake's time.
type DesiredChange struct {
	Group    string
	At       time.Time
	From, To int
}

// DesiredChanges are the group's desired-capacity changes by
// SetDesiredCapacity, in order (not those of AddGroup or terminations).
func (s *Server) DesiredChanges(group string) []DesiredChange {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []DesiredChange
	for _, c := range s.desiredLog {
		if c.Group == group {
			out = append(out, c)
		}
	}
	return out
}

// FailedLaunches are the start times of the group's failed launch
// activities (FailLaunches), in order.
func (s *Server) FailedLaunches(group string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reconcileLocked()
	var out []time.Time
	for _, a := range s.activities {
		if a.Group == group && a.StatusCode == statusFailed {
			out = append(out, a.Start)
		}
	}
	return out
}
